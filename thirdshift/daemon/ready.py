"""Which issue is Ready: the rules of a pickup, as pure functions of what GitHub said.

An issue is Ready when it is an open issue (not a pull request) carrying the Ready label,
labelled by someone with write or triage permission, carrying none of the excluded labels,
blocked by no open issue, and unchanged for the settle time. Ready issues are taken lowest
number first. Each rule that fails gives one pass-over reason, worded for the Activity log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from thirdshift.records import BlockingIssue, IssueSummary, Notification
from thirdshift.runs.rules import ROLES_THAT_LABEL as ROLES_THAT_LABEL


@dataclass(frozen=True)
class ReadyRules:
    ready_label: str
    in_progress_label: str
    excluded_labels: frozenset[str]  # lower case
    settle: timedelta
    daily_budget_usd: float | None = None
    review_handle: str = "thirdshift"
    max_review_repairs: int = 3
    merge_label: str = "thirdshift-merge"

    @classmethod
    def of(
        cls,
        *,
        ready_label: str,
        in_progress_label: str,
        excluded_labels: Sequence[str],
        settle_seconds: float,
        daily_budget_usd: float | None = None,
        review_handle: str = "thirdshift",
        max_review_repairs: int = 3,
        merge_label: str = "thirdshift-merge",
    ) -> ReadyRules:
        return cls(
            ready_label,
            in_progress_label,
            frozenset(label.lower() for label in excluded_labels),
            timedelta(seconds=settle_seconds),
            daily_budget_usd,
            review_handle,
            max_review_repairs,
            merge_label,
        )


def budget_reason(spent_today_usd: float, rules: ReadyRules, repository: str) -> str | None:
    """Why no issue of ``repository`` is picked up today, or None: its daily cost budget is
    spent. A Run started now would fail at once and take the issue's Ready label with it."""
    cap = rules.daily_budget_usd
    if cap is None or spent_today_usd < cap:
        return None
    # The amount spent stays out: the reason must not change (and be logged again) with it.
    return (
        f"the daily cost budget of {repository} (${cap:.2f}) is spent for today (UTC); raise "
        "cost_budget_per_repository_day_usd, or it waits for tomorrow"
    )


def first_look(issue: IssueSummary, rules: ReadyRules, unchanged_for: timedelta) -> str | None:
    """Why ``issue`` is passed over by what the list of issues shows, or None. These rules
    cost no request, so they run before the ones that ask GitHub. ``unchanged_for`` is how long
    the issue has been as it is now, as far as the daemon knows. An issue that also carries
    ``in-progress`` with no live Claim is one a person handed back after a Failed run: it is
    Ready."""
    labels = {label.lower() for label in issue.labels}
    if issue.is_pull_request:
        return f"it is a pull request; {rules.ready_label} applies to issues only"
    if issue.state != "open":
        return "it is closed"
    if rules.ready_label.lower() not in labels:
        return f"it no longer carries {rules.ready_label}"
    excluded = sorted(labels & rules.excluded_labels)
    if excluded:
        return f"it carries {', '.join(excluded)}; remove that label to let thirdshift take it"
    if unchanged_for < rules.settle:
        # No countdown: the reason must read the same on every poll until it changes.
        return (
            f"it changed recently; it is taken once unchanged for {rules.settle.total_seconds():g}s"
        )
    return None


def labeller_reason(labeller: str | None, role: str | None, rules: ReadyRules) -> str | None:
    """Why the labeller's word is not enough, or None: only people who may triage or write
    decide what the factory works on."""
    if labeller is None:
        return (
            f"GitHub shows no one adding {rules.ready_label}; remove it and add it again to "
            "have it taken"
        )
    if role not in ROLES_THAT_LABEL:
        return (
            f"{labeller} added {rules.ready_label} with {role or 'no'} permission; someone with "
            "triage or write permission must add it"
        )
    return None


def blocker_reason(blockers: Sequence[BlockingIssue]) -> str | None:
    """Why a blocked issue waits (an open blocker, here or in another repository), or None."""
    still_open = sorted((b for b in blockers if b.state == "open"), key=lambda b: b.order)
    if not still_open:
        return None
    listed = ", ".join(f"{b.elsewhere}#{b.number}" for b in still_open)
    return f"it is blocked by {listed}, still open; it is taken once they close"


def lowest_first(issues: Sequence[IssueSummary]) -> list[IssueSummary]:
    return sorted(issues, key=lambda issue: issue.number)


def pass_over_notification(
    repository: str, issue_number: int, issue_url: str, reason: str
) -> Notification:
    """The message of a Ready label passed over because its labeller lacks permission."""
    return Notification(
        event="issue.passed_over",
        repository=repository,
        issue_number=issue_number,
        issue_url=issue_url,
        state="passed-over",
        cause=reason,
    )


def ticket_reason(spec: int | None) -> str | None:
    """Why a Ready Ticket of Spec ``spec`` is passed over (None: it is no Ticket of a Spec a
    Spec run holds or takes now): the Spec run runs it into its Spec branch, in its turn."""
    if spec is None:
        return None
    return f"it is a Ticket of Spec #{spec}, whose Spec run runs it"
