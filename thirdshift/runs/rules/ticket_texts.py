"""What the Spec PR and a Failed spec run say, as pure rules over their Tickets (issue 23).

The draft Spec PR carries a checklist of the Tickets between thirdshift's two markers, one line
per Ticket lowest number first, rewritten as each lands. Only the text between the markers is
thirdshift's: a person's edits around it stay. The final body puts the Spec review's text after
the checklist and ends with thirdshift's one ``Closes #<spec>``: the Spec PR merges into the
Base branch and closes the Spec, while each Ticket is closed by thirdshift itself once it lands
in the Spec branch, so nothing in the body closes a Ticket.

Markers a person pasted twice or broke: a start marker directly followed by an end marker (no
other marker between) is a checklist, and every such pair is rewritten (a copy pasted whole
stays current); a lone start or end marker is text and stays as it is; a body with no pair gets
one appended. Rewriting keeps the markers and their order, so it is idempotent and never removes
a person's text outside a pair.

A Ticket's title and cause are strangers' text. They come scrubbed (defanging goes last: a
zero-width space inside a secret would hide it from the scrubber); each line is flattened to one
line, cut, and defanged whole (a title ending in a closing keyword must not close the pull
request named after it), so nothing in it notifies, closes, links elsewhere or forges a marker.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from thirdshift.defang import TITLE_CHARS, defanged, pull_request_body
from thirdshift.runs.rules.tickets import TicketSchedule

CHECKLIST_START = "<!-- thirdshift:spec-checklist -->"
CHECKLIST_END = "<!-- thirdshift:spec-checklist-end -->"
FAILED_SPEC_RUN_MARKER = "<!-- thirdshift:failed-spec-run -->"
REASON_CHARS = 100  # a checklist line's reason; stderr and the comment carry the whole line

_MARKERS = re.compile(f"{re.escape(CHECKLIST_START)}|{re.escape(CHECKLIST_END)}")


@dataclass(frozen=True)
class TicketText:
    """What the Spec PR and a Failed spec run say of one Ticket: its title, whether it landed in
    the Spec branch and with which pull request, and, when not done, why (``NotDone.why``; ""
    for one still to run or running). ``title`` and ``why`` come scrubbed."""

    number: int
    title: str
    landed: bool = False
    pull: int | None = None
    why: str = ""


def ticket_texts(
    schedule: TicketSchedule, titles: Mapping[int, str], pulls: Mapping[int, int]
) -> tuple[TicketText, ...]:
    """Every Ticket of ``schedule``, lowest number first, with its title and (once landed) its
    pull request into the Spec branch, and why it is not done."""
    whys = {d.number: d.why for d in schedule.not_done}
    landed = set(schedule.landed)
    numbers = {*schedule.start, *schedule.running, *schedule.waiting, *landed, *whys}
    return tuple(
        TicketText(n, titles.get(n, ""), n in landed, pulls.get(n), whys.get(n, ""))
        for n in sorted(numbers)
    )


def checklist_body(tickets: Iterable[TicketText], repository: str | None = None) -> str:
    """The checklist of the draft Spec PR (without its markers: ``with_checklist`` places it),
    one line per Ticket lowest number first: ``- [x] #12 Title — #31`` once landed with its pull
    request, ``- [ ] #13 Title`` before, ``- [ ] #14 Title — not done: <reason>`` when not
    done."""
    lines = (defanged(_checklist_line(t), repository) for t in _ordered(tickets))
    return _no_comment("\n".join(lines))


def with_checklist(body: str, checklist: str) -> str:
    """``body`` with ``checklist`` between thirdshift's markers: each checklist in it rewritten
    and everything else kept as written, or, with none, one appended after it."""
    if _MARKERS.search(checklist):
        raise ValueError("a checklist cannot hold thirdshift's checklist markers")
    inner = f"\n{checklist.strip()}\n"
    pairs = _pairs(body)
    if not pairs:
        return body + _separator(body) + CHECKLIST_START + inner + CHECKLIST_END
    pieces: list[str] = []
    last = 0
    for start, end in pairs:
        pieces += [body[last:start], inner]
        last = end
    return "".join(pieces) + body[last:]


def draft_body(spec: int, checklist: str) -> str:
    """The draft Spec PR's body when the first Ticket lands. It closes nothing: a person who
    marks it ready and merges it before every Ticket landed must not close the Spec."""
    intro = (
        f"The Spec run of #{spec}: each Ticket lands in this branch through a pull request of "
        "its own, ticked below as it lands. This pull request stays a draft until every Ticket "
        "has landed and the Spec review has written its text."
    )
    return with_checklist(intro, checklist)


def spec_pr_body(
    spec: int, review_text: str, tickets: Iterable[TicketText], repository: str | None = None
) -> str:
    """The Spec PR's final body: the checklist naming every Ticket with its pull request, then
    the Spec review's text (scrubbed), defanged with its own line closing the Spec dropped, and
    thirdshift's one ``Closes #<spec>`` at the end."""
    block = with_checklist("", checklist_body(tickets, repository))
    return f"{block}\n\n{pull_request_body(review_text, spec, repository)}"


def failure_lines(tickets: Iterable[TicketText]) -> tuple[str, ...]:
    """What a Failed spec run writes on stderr: each Ticket lowest number first, landed (with
    its pull request) or not done with why, then ``Tickets not done: #13, #14``."""
    ordered = _ordered(tickets)
    not_done = ", ".join(f"#{t.number}" for t in ordered if not t.landed)
    return (*(_failure_line(t) for t in ordered), f"Tickets not done: {not_done}")


def failure_comment(
    tickets: Iterable[TicketText], spec_pull: int | None = None, repository: str | None = None
) -> str:
    """The one comment of a Failed spec run on the Spec (posted under
    ``FAILED_SPEC_RUN_MARKER``, so a later one edits it): the lines of ``failure_lines``,
    defanged, and how to continue."""
    *each, last = failure_lines(tickets)
    where = f"The Spec PR #{spec_pull} stays a draft. " if spec_pull is not None else ""
    text = "\n".join(
        [
            "thirdshift could not finish this Spec run: not every Ticket landed in the Spec "
            "branch.",
            "",
            *(f"- {line}" for line in each),
            "",
            f"**{last}**",
            "",
            f"{where}Running the Spec again continues: Tickets that landed are not run again, "
            "and failed ones continue their Issue branches.",
        ]
    )
    return _no_comment(defanged(text, repository))


def _no_comment(text: str) -> str:
    """``text`` with no HTML comment opening in it: a title's ``<!--`` would hide the lines
    after it on GitHub (the comment shows as written)."""
    return text.replace("<!--", "&lt;!--")


def _ordered(tickets: Iterable[TicketText]) -> list[TicketText]:
    by_number: dict[int, TicketText] = {}
    for ticket in tickets:
        if ticket.number in by_number:
            raise ValueError(f"Ticket #{ticket.number} is given twice")
        by_number[ticket.number] = ticket
    return [by_number[n] for n in sorted(by_number)]


def _one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line without control characters (a title may hold a terminal's escape),
    cut to ``limit`` characters."""
    flat = "".join(c for c in " ".join(text.split()) if c.isprintable())
    if limit is not None and len(flat) > limit:
        return flat[: limit - 1] + "…"
    return flat


def _reason(why: str, limit: int | None = None) -> str:
    """A cause's first line: the rest is the Post-mortem's, on the Ticket's own Failed run."""
    lines = why.strip().splitlines()
    return _one_line(lines[0] if lines else "", limit)


def _named(ticket: TicketText) -> str:
    return f"#{ticket.number} {_one_line(ticket.title, TITLE_CHARS)}".rstrip()


def _checklist_line(ticket: TicketText) -> str:
    if ticket.landed:
        pull = f" — #{ticket.pull}" if ticket.pull is not None else ""
        return f"- [x] {_named(ticket)}{pull}"
    reason = _reason(ticket.why, REASON_CHARS)
    return f"- [ ] {_named(ticket)}" + (f" — not done: {reason}" if reason else "")


def _failure_line(ticket: TicketText) -> str:
    if ticket.landed:
        pull = f" with pull request #{ticket.pull}" if ticket.pull is not None else ""
        return f"{_named(ticket)}: landed{pull}"
    return f"{_named(ticket)}: not done: {_reason(ticket.why) or 'not started'}"


def _pairs(body: str) -> Sequence[tuple[int, int]]:
    """Where each checklist of ``body`` lies: (after its start marker, before its end marker)
    for each start marker whose next marker is an end marker."""
    found = list(_MARKERS.finditer(body))
    return [
        (opened.end(), closed.start())
        for opened, closed in itertools.pairwise(found)
        if opened.group() == CHECKLIST_START and closed.group() == CHECKLIST_END
    ]


def _separator(body: str) -> str:
    """What goes between a body and a checklist appended to it: a blank line, unless it has."""
    if not body or body.endswith("\n\n"):
        return ""
    return "\n" if body.endswith("\n") else "\n\n"
