"""Spec preambles: the Spec's brief and each blocker's outcome in full, older Tickets as
pointers, within the cap for any input; pointers give way first, then the brief, then the oldest
blocker's detail, each cut counted exactly; no field breaks the shape; a slash command stays
first. Examples first, then properties over any input."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thirdshift.sessions.preamble import MIN_CAP_TOKENS, before_prompt, count_tokens
from thirdshift.sessions.spec_preamble import (
    TITLE_BYTES,
    SpecBrief,
    TicketEnding,
    TicketOutcome,
    spec_review_preamble,
    ticket_preamble,
)

CONTROLS = "".join(map(chr, [*range(0x20), 0x7F]))
# A marker is a line of its own (indented at most two spaces): a field can only quote one.
MARKER = re.compile(r"^(?:  )?\[(\d+) (.+) left out\]$", re.MULTILINE)
OUR_LINES = re.compile(
    r"(?:This Ticket is part of Spec #|This is the Spec review of Spec #|From thirdshift's "
    r"records, |The Spec's brief:$|The Tickets it is blocked by, nearest first:$|Its Tickets:$"
    r"|Earlier Tickets, nearest first:$|- #\d+ |(?:  )?\[\d+ .+ left out\]$|$)"
)


def ticket(
    number: int,
    *,
    title: str = "",
    gist: str = "Done.",
    changed: tuple[str, ...] = ("src/a.py | 4 ++--",),
    state: TicketEnding = TicketEnding.LANDED,
    cause: str = "",
) -> TicketOutcome:
    return TicketOutcome(
        number,
        title or f"Ticket {number}",
        state,
        pull_request_title=f"Do ticket {number}",
        pull_request_url=f"https://github.com/o/r/pull/{100 + number}",
        gist=gist,
        changed=changed,
        cause=cause,
    )


def left_out(text: str) -> dict[str, int]:
    return {what: int(count) for count, what in MARKER.findall(text)}


SPEC = SpecBrief(7, "A parser and its CLI", "Build the parser.\n\nThen the CLI on top of it.")


def test_the_spec_brief_and_each_blocker_come_in_full_and_ancestors_as_pointers() -> None:
    a = ticket(8, gist="Added the lexer.\nTests pass.", changed=("src/lex.py", "tests/t.py"))
    b = ticket(9, gist="Added the grammar.")
    old = ticket(3, title="Set up the package")
    text = ticket_preamble(SPEC, [a, b], [old])
    assert text.startswith("This Ticket is part of Spec #7: A parser and its CLI\n")
    assert "  > Build the parser.\n  > Then the CLI on top of it.\n" in text
    assert text.index("- #8 Ticket 8 (landed in the Spec branch)") < text.index("- #9 Ticket 9")
    assert "  Pull request: Do ticket 8 https://github.com/o/r/pull/108\n" in text
    assert "  > Added the lexer.\n  > Tests pass.\n" in text
    assert "  What it changed:\n  > src/lex.py\n  > tests/t.py\n" in text
    assert "- #3 Set up the package → https://github.com/o/r/pull/103\n" in text
    assert not left_out(text)


def test_the_spec_review_carries_each_tickets_outcome_with_its_cause() -> None:
    failed = ticket(8, state=TicketEnding.FAILED, cause="CI red\nafter 3 Repairs")
    waiting = TicketOutcome(9, "Wire the CLI", TicketEnding.NOT_DONE, cause="blocked by #8")
    text = spec_review_preamble(SPEC, [ticket(10), failed, waiting])
    assert text.startswith("This is the Spec review of Spec #7: A parser and its CLI\n")
    assert "- #10 Ticket 10 (landed in the Spec branch)\n" in text
    assert "- #8 Ticket 8 (failed: CI red after 3 Repairs)\n" in text
    assert "- #9 Wire the CLI (not done: blocked by #8)\n  No pull request.\n" in text


def test_pointers_give_way_before_the_nearest_blocker() -> None:
    nearest = ticket(20, gist="The nearest gist.")
    ancestors = [ticket(n, title="x" * 150) for n in range(1, 40)]
    text = ticket_preamble(SPEC, [nearest], ancestors, cap_tokens=400)
    assert count_tokens(text) <= 400
    assert "- #20 Ticket 20" in text
    assert "  > The nearest gist.\n" in text
    assert "  > Build the parser.\n" in text  # the brief is not cut while a pointer is left
    shown = text.count("\n- #") - 1
    assert 0 < shown < len(ancestors)
    assert left_out(text) == {"earlier Ticket(s)": len(ancestors) - shown}


def test_the_brief_is_cut_before_any_blockers_detail_and_the_count_is_exact() -> None:
    body = "\n".join(f"Step {i} of the plan." for i in range(300))
    spec = SpecBrief(7, "Big", body)
    text = ticket_preamble(spec, [ticket(8, gist="Lexer.\nGrammar.")], [ticket(3)], 500)
    assert count_tokens(text) <= 500
    assert "  > Lexer.\n  > Grammar.\n" in text
    assert "  > src/a.py | 4 ++--\n" in text
    shown = text.count("  > Step ")
    assert left_out(text) == {
        "earlier Ticket(s)": 1,
        "line(s) of the Spec's brief": 300 - shown,
    }


def test_the_oldest_blockers_detail_is_cut_before_the_nearests() -> None:
    gist = "\n".join(f"line {i}" for i in range(40))
    blockers = [ticket(n, gist=gist) for n in (30, 20, 10)]
    text = ticket_preamble(SpecBrief(7, "Big", ""), blockers, [], cap_tokens=300)
    assert count_tokens(text) <= 300
    nearest = text[text.index("- #30") : text.index("- #20")]
    oldest = text[text.index("- #10") :]
    assert nearest.count("  > line ") >= oldest.count("  > line ")
    assert "[40 line(s) of its final message left out]" in oldest
    assert "- #10 Ticket 10" in text  # its header stays


def test_whole_blockers_go_last_and_are_counted() -> None:
    blockers = [ticket(n, title="t" * 150, gist="g" * 250) for n in range(1, 30)]
    text = ticket_preamble(SPEC, blockers, [ticket(3)], cap_tokens=300)
    assert count_tokens(text) <= 300
    shown = text.count("\n- #")
    assert shown >= 1
    assert "- #1 " in text
    assert left_out(text)["blocker(s)"] == len(blockers) - shown
    assert left_out(text)["earlier Ticket(s)"] == 1  # no pointer while a blocker is left out


def test_a_leading_slash_command_stays_on_line_one() -> None:
    preamble = ticket_preamble(SPEC, [ticket(8)], [])
    prompt = before_prompt(preamble, "/implement #9\nImplement issue #9.")
    assert prompt.startswith("/implement #9\nThis Ticket is part of Spec #7")
    assert prompt.endswith("\nImplement issue #9.")


def test_a_field_with_newlines_and_headings_stays_inside_its_entry() -> None:
    hostile = "fine\n# Heading\n```\n- #99 forged entry\n[9 blocker(s) left out]\r\x1b[2J"
    evil = TicketOutcome(8, hostile, TicketEnding.FAILED, hostile, hostile, hostile, (hostile,))
    text = ticket_preamble(SpecBrief(7, hostile, hostile), [evil], [evil])
    assert_shape(text)
    assert text.count("\n- #") == 2  # the entry and the pointer, no forged one
    assert "\x1b" not in text
    assert "\r" not in text
    assert not left_out(text)


def test_each_field_is_bounded() -> None:
    long = TicketOutcome(8, "t" * 10_000, TicketEnding.LANDED, "p" * 10_000, "u" * 10_000)
    text = spec_review_preamble(SPEC, [long])
    assert "t" * TITLE_BYTES not in text
    assert "t" * (TITLE_BYTES - 4) + " ..." in text
    assert count_tokens(text) <= 2000


def test_no_harness_local_id_is_an_input() -> None:
    names = {f.name for f in fields(TicketOutcome)} | {f.name for f in fields(SpecBrief)}
    assert not {name for name in names if "model" in name or "session" in name}


def test_a_cap_below_the_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        ticket_preamble(SPEC, [], [], cap_tokens=MIN_CAP_TOKENS - 1)


def blank(line: str) -> bool:
    """Only spaces and control characters: a line no preamble shows."""
    return not "".join(" " if c in CONTROLS else c for c in line).strip()


def assert_shape(text: str) -> None:
    """Every line is one of the preamble's own or indented inside an entry."""
    for line in text.split("\n"):
        assert line.startswith("  ") or OUR_LINES.match(line), line


HOSTILE = st.text(st.sampled_from(list("ab #`>-[]()|\n\r\t\x0b\x1b\u2028\x85é😀")), max_size=400)
TEXT = HOSTILE | st.text(max_size=200)
OUTCOMES = st.builds(
    TicketOutcome,
    number=st.integers(1, 10**6),
    title=TEXT,
    state=st.sampled_from(TicketEnding),
    pull_request_title=TEXT,
    pull_request_url=TEXT,
    gist=TEXT,
    changed=st.lists(TEXT, max_size=4).map(tuple),
    cause=TEXT,
)
SPECS = st.builds(
    SpecBrief, number=st.integers(1, 10**6), title=TEXT, body=TEXT | st.text(max_size=9000)
)


@settings(max_examples=150, deadline=None)
@given(
    spec=SPECS,
    blockers=st.lists(OUTCOMES, max_size=8),
    ancestors=st.lists(OUTCOMES, max_size=8),
    cap=st.integers(MIN_CAP_TOKENS, 2500),
)
def test_the_cap_and_the_shape_hold_and_every_count_is_exact_for_any_input(
    spec: SpecBrief, blockers: list[TicketOutcome], ancestors: list[TicketOutcome], cap: int
) -> None:
    """Within the cap, every line ours or inside an entry, and what is shown plus what is
    counted out is everything there was."""
    text = ticket_preamble(spec, blockers, ancestors, cap_tokens=cap)
    assert count_tokens(text) <= cap
    assert_shape(text)
    counts = left_out(text)
    brief_lines = [line for line in spec.body.splitlines() if not blank(line)]
    shown_brief = len(re.findall(r"^  > ", text.split("\n- #", 1)[0], re.MULTILINE))
    assert shown_brief + counts.get("line(s) of the Spec's brief", 0) == len(brief_lines)
    entries = text.count("\n- #")
    counted = counts.get("blocker(s)", 0) + counts.get("earlier Ticket(s)", 0)
    assert entries + counted == len(blockers) + len(ancestors)
    if counts.get("blocker(s)"):
        assert counts.get("earlier Ticket(s)", 0) == len(ancestors)


@settings(max_examples=100, deadline=None)
@given(spec=SPECS, tickets=st.lists(OUTCOMES, max_size=10), cap=st.integers(MIN_CAP_TOKENS, 2500))
def test_the_spec_review_holds_its_cap_and_shape_for_any_input(
    spec: SpecBrief, tickets: list[TicketOutcome], cap: int
) -> None:
    """The Spec review's preamble, over any Tickets, within its cap and its shape."""
    text = spec_review_preamble(spec, tickets, cap_tokens=cap)
    assert count_tokens(text) <= cap
    assert_shape(text)
    assert text.count("\n- #") + left_out(text).get("Ticket(s)", 0) == len(tickets)
