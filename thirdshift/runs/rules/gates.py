"""The gates of an Architect run, as a pure rule: what stops one from going ahead now (an
open plan, an idea waiting for triage, a Ready issue, the weekly cap)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from thirdshift.records import IssueSummary
from thirdshift.runs.rules.plans import TRIAGE_LABEL


@dataclass(frozen=True)
class Skip:
    """Why an Architect run does nothing now, and the URLs of what stops it."""

    reason: str
    urls: tuple[str, ...] = ()


def architect_gate(
    *,
    repository: str,
    open_plans: Sequence[IssueSummary],
    waiting_ideas: Sequence[IssueSummary],
    ready: Sequence[IssueSummary],
    published: Sequence[datetime],
    per_week: int,
    now: datetime,
) -> Skip | None:
    """Why no Architect run goes ahead now, or None. In order: an open plan (one at a time;
    ``open_plans`` are the open issues labelled as a plan, its Spec and Tickets among them),
    an idea still waiting for triage (people have not answered the last one), a Ready issue
    (work people shaped goes first), the weekly cap (``published``: when this repository's
    earlier plans and ideas were published)."""
    if open_plans:
        # A plan's issues are published Spec first, then its Tickets: the plan is named by the
        # first of them still open, the others are its parts, not plans of their own.
        first, *rest = sorted(open_plans, key=lambda issue: issue.number)
        parts = f" (with {', '.join(f'#{i.number}' for i in rest)})" if rest else ""
        return Skip(
            f'Architect plan #{first.number} "{first.title}"{parts} is still open on '
            f"{repository}: one plan at a time; close it or finish it first",
            (first.html_url,),
        )
    if waiting_ideas:
        newest = sorted(waiting_ideas, key=lambda issue: issue.number, reverse=True)
        said = "; ".join(f'#{i.number} "{i.title}"' for i in newest)
        return Skip(
            f"Architect idea {said} is waiting for triage on {repository}: take "
            f"{TRIAGE_LABEL} off (or close it) first",
            tuple(i.html_url for i in newest),
        )
    if ready:
        first = min(ready, key=lambda issue: issue.number)
        return Skip(
            f'Ready issue #{first.number} "{first.title}" goes first on {repository}',
            (first.html_url,),
        )
    week = [when for when in published if now - when < timedelta(days=7)]
    if len(week) >= per_week:
        due = min(week) + timedelta(days=7)
        return Skip(
            f"{len(week)} Architect plan(s) or idea(s) were published on {repository} in the "
            f"last 7 days and architect_plans_per_week is {per_week}; the next may go after "
            f"{due:%Y-%m-%d %H:%M} UTC"
        )
    return None


def waiting_for_triage(issues: Sequence[IssueSummary]) -> list[IssueSummary]:
    """The open issues among ``issues`` that still carry ``needs-triage``."""
    return [
        issue
        for issue in issues
        if issue.state == "open" and TRIAGE_LABEL in {label.lower() for label in issue.labels}
    ]
