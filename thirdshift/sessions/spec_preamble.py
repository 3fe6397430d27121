"""Spec preambles: the bounded text that opens a Ticket session, or the Spec review, with what
the Spec asks and what the Tickets before it did, built from our database (ADR 0001, ADR 0015).

- the **Ticket preamble**: the Spec's brief, then each direct blocker in full (its state, pull
  request title and address, the gist of its final message, what it changed), nearest first,
  then older ancestors as one-line pointers (``#n title → pull request``);
- the **Spec review preamble**: the Spec's brief, then every Ticket's outcome the same way.

Each fits its cap (tokens counted as ``preamble.count_tokens`` does). What gives way first:
the pointers (the oldest first), then the Spec's brief (its last lines first), then the
entries' detail (the oldest entry's first, its final message before what it changed). Only an
entry whose header does not fit even with every block cut to nothing is left out whole (the
oldest first). So pointers never crowd out a blocker. Every cut says
what it left out with an exact count of the lines not shown (blank lines are never shown).

Every field is text from strangers or agents, scrubbed by the caller: here it is only kept from
breaking the preamble's shape. A one-line field has every line break and control character
folded to a space; a many-line field is shown one quoted, indented line at a time (``  > ``);
so no field can open a line of its own, a heading or a code fence. Each field is bounded.
Harness-local ids (the Model, a session id) are not inputs: no Ticket inherits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from thirdshift.sessions.preamble import BYTES_PER_TOKEN, FOLLOW_UP_CAP_TOKENS, MIN_CAP_TOKENS

TITLE_BYTES = 160
"""An issue's or a pull request's title, on one line."""
URL_BYTES = 200
CAUSE_BYTES = 300
LINE_BYTES = 300
"""One line of a many-line field (the Spec's brief, a final message, what a Ticket changed)."""
MESSAGE_BYTES = 900
"""The gist of a Ticket's final message, before any cut the cap asks for."""
CHANGED_BYTES = 600
"""What a Ticket changed, before any cut the cap asks for."""

# C0 controls and DEL: a terminal escape or a stray carriage return is no text for an agent.
_CONTROLS = {code: " " for code in [*range(0x20), 0x7F]}


class TicketEnding(Enum):
    """How a Ticket's Run ended, as a preamble says it."""

    LANDED = "landed"  # merged into the Spec branch
    FAILED = "failed"
    NOT_DONE = "not done"  # never run, blocked, or closed by a person without a landing


@dataclass(frozen=True)
class SpecBrief:
    """The Spec as its Tickets see it: its number, title and body."""

    number: int
    title: str
    body: str


@dataclass(frozen=True)
class TicketOutcome:
    """What one Ticket's Run did: its pull request (title and address), the gist of its final
    message, what it changed (paths or the lines of a short diff stat) and how it ended
    (``cause``: why it failed or is not done)."""

    number: int
    title: str
    state: TicketEnding
    pull_request_title: str = ""
    pull_request_url: str = ""
    gist: str = ""
    changed: tuple[str, ...] = ()
    cause: str = ""


@dataclass(frozen=True)
class _Block:
    """Lines that may be cut from the end: shown under ``label`` (when any line is), then a
    marker counting the lines left out, indented like them."""

    lines: tuple[str, ...]
    what: str
    label: str = ""
    indent: str = ""

    def render(self, kept: int) -> str:
        return (self.label if kept else "") + "".join(self.lines[:kept]) + self._marker(kept)

    def keep(self, room: int) -> int:
        """The most lines that fit ``room`` bytes with their label and marker (0 if none)."""
        best = 0
        used = 0
        label = len(self.label.encode())
        for kept in range(len(self.lines) + 1):
            if kept:
                used += len(self.lines[kept - 1].encode())
                if used + label > room:
                    break
            if (label if kept else 0) + used + len(self._marker(kept).encode()) <= room:
                best = kept
        return best

    def _marker(self, kept: int) -> str:
        left = len(self.lines) - kept
        return f"{self.indent}[{left} {self.what} left out]\n" if left else ""


@dataclass(frozen=True)
class _Entry:
    """One Ticket: a header that is never cut, and detail blocks cut first to last."""

    header: str
    blocks: tuple[_Block, _Block]


@dataclass(frozen=True)
class _Layout:
    """A preamble before any cut: what never gives way (``top``, ``heading``) and what may."""

    top: str
    body: _Block
    heading: str
    entries: tuple[_Entry, ...]  # nearest first
    entries_what: str
    pointers: _Block

    def blocks(self) -> list[_Block]:
        """Every block in the order shown: the pointers, the brief, then each entry's."""
        return [self.pointers, self.body, *(b for e in self.entries for b in e.blocks)]

    def render(self, kept: Sequence[int], entries: int) -> str:
        text = self.top + self.body.render(kept[1])
        if self.entries:
            text += self.heading
        for index, entry in enumerate(self.entries[:entries]):
            text += entry.header
            text += "".join(b.render(kept[2 + 2 * index + j]) for j, b in enumerate(entry.blocks))
        if entries < len(self.entries):
            text += f"[{len(self.entries) - entries} {self.entries_what} left out]\n"
        return text + self.pointers.render(kept[0]) + "\n"


def ticket_preamble(
    spec: SpecBrief,
    blockers: Sequence[TicketOutcome],
    ancestors: Sequence[TicketOutcome],
    cap_tokens: int = FOLLOW_UP_CAP_TOKENS,
) -> str:
    """A Ticket session's opening context within ``cap_tokens``: the Spec's brief, each of
    ``blockers`` (the Ticket's direct blockers, nearest first) in full, and ``ancestors``
    (older ones, nearest first) as one-line pointers. Caps below ``MIN_CAP_TOKENS`` are
    refused (``ValueError``)."""
    pointers = _Block(
        tuple(_pointer(ticket) for ticket in ancestors),
        "earlier Ticket(s)",
        label="Earlier Tickets, nearest first:\n",
    )
    layout = _Layout(
        top=f"This Ticket is part of Spec #{spec.number}: {_one_line(spec.title, TITLE_BYTES)}\n"
        "From thirdshift's records, what the Spec asks and what the Tickets before this one did.\n",
        body=_brief(spec),
        heading="The Tickets it is blocked by, nearest first:\n",
        entries=tuple(_entry(ticket) for ticket in blockers),
        entries_what="blocker(s)",
        pointers=pointers,
    )
    return _fit(layout, cap_tokens)


def spec_review_preamble(
    spec: SpecBrief, tickets: Sequence[TicketOutcome], cap_tokens: int = FOLLOW_UP_CAP_TOKENS
) -> str:
    """The Spec review's opening context within ``cap_tokens``: the Spec's brief and every one
    of ``tickets`` in full, in the order given (the last given is cut first)."""
    layout = _Layout(
        top=f"This is the Spec review of Spec #{spec.number}: "
        f"{_one_line(spec.title, TITLE_BYTES)}\n"
        "From thirdshift's records, what the Spec asks and how each of its Tickets ended.\n",
        body=_brief(spec),
        heading="Its Tickets:\n",
        entries=tuple(_entry(ticket) for ticket in tickets),
        entries_what="Ticket(s)",
        pointers=_Block((), "earlier Ticket(s)"),
    )
    return _fit(layout, cap_tokens)


def _fit(layout: _Layout, cap_tokens: int) -> str:
    """``layout`` cut down the ladder until it fits: as many entries as fit with every block
    cut to nothing (the oldest dropped first), then each block cut only as far as needed, in
    turn: the pointers, the brief, the oldest entry's detail up to the nearest's."""
    if cap_tokens < MIN_CAP_TOKENS:
        raise ValueError(f"a preamble needs at least {MIN_CAP_TOKENS} tokens, not {cap_tokens}")
    budget = cap_tokens * BYTES_PER_TOKEN
    blocks = layout.blocks()
    entries = len(layout.entries)
    while entries and len(layout.render([0] * len(blocks), entries).encode()) > budget:
        entries -= 1
    kept = [len(block.lines) for block in blocks]
    if entries < len(layout.entries):
        kept[0] = 0  # no pointer is shown while a blocker is left out
    for index in range(2, len(blocks)):  # each field's own bound, before the cap's
        kept[index] = blocks[index].keep(MESSAGE_BYTES if index % 2 == 0 else CHANGED_BYTES)
    order = [0, 1, *(i for e in reversed(range(entries)) for i in (2 + 2 * e, 3 + 2 * e))]
    for index in order:
        over = len(layout.render(kept, entries).encode()) - budget
        if over <= 0:
            break
        room = len(blocks[index].render(kept[index]).encode()) - over
        kept[index] = blocks[index].keep(room)
    return layout.render(kept, entries)


def _brief(spec: SpecBrief) -> _Block:
    return _Block(
        _quoted(spec.body.splitlines(), "  > "),
        "line(s) of the Spec's brief",
        label="The Spec's brief:\n",
        indent="  ",
    )


def _entry(ticket: TicketOutcome) -> _Entry:
    """A Ticket's full entry: its number, title and state, its pull request, then the gist of
    its final message and what it changed."""
    state = ticket.state.value
    if ticket.state is TicketEnding.LANDED:
        state = "landed in the Spec branch"
    elif ticket.cause.strip():
        state += f": {_one_line(ticket.cause, CAUSE_BYTES)}"
    header = f"- #{ticket.number} {_one_line(ticket.title, TITLE_BYTES)} ({state})\n"
    if ticket.pull_request_url.strip() or ticket.pull_request_title.strip():
        title = _one_line(ticket.pull_request_title, TITLE_BYTES)
        header += f"  Pull request: {title} {_one_line(ticket.pull_request_url, URL_BYTES)}\n"
    else:
        header += "  No pull request.\n"
    message = _Block(
        _quoted(ticket.gist.splitlines(), "  > "),
        "line(s) of its final message",
        label="  Its final message, in short:\n",
        indent="  ",
    )
    changed = _Block(
        _quoted([line for item in ticket.changed for line in item.splitlines()], "  > "),
        "line(s) of what it changed",
        label="  What it changed:\n",
        indent="  ",
    )
    return _Entry(header, (message, changed))


def _pointer(ticket: TicketOutcome) -> str:
    """One line: ``- #n title → pull request``."""
    where = _one_line(ticket.pull_request_url, URL_BYTES) or "(no pull request)"
    return f"- #{ticket.number} {_one_line(ticket.title, TITLE_BYTES)} → {where}\n"


def _quoted(lines: Sequence[str], prefix: str) -> tuple[str, ...]:
    """Each non-blank line, bounded and behind ``prefix``: never a line of the preamble's own."""
    shown = (_bounded(line.translate(_CONTROLS).rstrip(), LINE_BYTES) for line in lines)
    return tuple(f"{prefix}{line}\n" for line in shown if line.strip())


def _one_line(text: str, max_bytes: int) -> str:
    return _bounded(" ".join(text.translate(_CONTROLS).split()), max_bytes)


def _bounded(text: str, max_bytes: int) -> str:
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max_bytes - 4].decode(errors="ignore") + " ..."
