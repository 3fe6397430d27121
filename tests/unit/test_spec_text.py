"""The Spec PR's text and the Failed spec run's report: the checklist between thirdshift's
markers, kept apart from a person's edits; hostile Ticket titles made inert; the final body
closing only the Spec; the failure lines naming every Ticket. Examples, then properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thirdshift.defang import ZERO_WIDTH, closed_elsewhere
from thirdshift.runs.rules.ticket_texts import (
    CHECKLIST_END,
    CHECKLIST_START,
    TicketText,
    checklist_body,
    draft_body,
    failure_comment,
    failure_lines,
    spec_pr_body,
    ticket_texts,
    with_checklist,
)
from thirdshift.runs.rules.tickets import (
    Blocker,
    Ticket,
    TicketState,
    schedule_tickets,
    tickets_not_done_line,
)

REPO = "o/r"
SPEC = 7
START, END = CHECKLIST_START, CHECKLIST_END

TICKETS = (
    TicketText(13, "Second part"),
    TicketText(12, "First part", landed=True, pull=31),
    TicketText(14, "Third part", why="failed: the tests stay red\nand more lines"),
)

HOSTILE = (
    "Closes #7, fixes #12 and resolves o/r#3 for @mona and @acme/core, see evil/repo#9 "
    f"and https://github.com/evil/repo/issues/2 {END} {START} <!-- thirdshift:claim -->"
)


def checklist(tickets: tuple[TicketText, ...] = TICKETS) -> str:
    return checklist_body(tickets, REPO)


def closes(text: str, number: int = 0) -> tuple[str, ...]:
    """Every issue ``text`` closes once merged into the default branch (``number`` aside)."""
    return closed_elsewhere(text, number, REPO)


def visible(text: str) -> str:
    return text.replace(ZERO_WIDTH, "")


# The checklist


def test_the_checklist_has_one_line_per_ticket_lowest_number_first() -> None:
    assert checklist().splitlines() == [
        "- [x] #12 First part — #31",
        "- [ ] #13 Second part",
        "- [ ] #14 Third part — not done: failed: the tests stay red",
    ]


def test_a_long_or_multi_line_reason_is_cut_to_its_first_line() -> None:
    (line,) = checklist((TicketText(5, "T", why="failed: " + "x" * 300 + "\nsecond"),)).split("\n")
    assert line.endswith("…")
    assert "second" not in line
    assert len(line) < 140


def test_a_title_on_several_lines_stays_on_its_one_line() -> None:
    assert (
        checklist((TicketText(5, "one\n- [x] #9 forged\ttwo"),))
        == "- [ ] #5 one - [x] #9 forged two"
    )


def test_a_ticket_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="#5"):
        checklist((TicketText(5, "a"), TicketText(5, "b")))


def test_the_checklist_follows_the_schedule() -> None:
    """Landed Tickets with their pull requests, not done ones with why, the rest unticked."""
    schedule = schedule_tickets(
        [
            Ticket(1, False, state=TicketState.LANDED),
            Ticket(2, False, state=TicketState.FAILED, cause="CI red"),
            Ticket(3, False, (Blocker(2, False),)),
            Ticket(4, False, (Blocker(1, False),), state=TicketState.RUNNING),
        ],
        parallel=3,
    )
    texts = ticket_texts(schedule, {1: "A", 2: "B", 3: "C", 4: "D"}, {1: 40})
    assert checklist(texts).splitlines() == [
        "- [x] #1 A — #40",
        "- [ ] #2 B — not done: failed: CI red",
        "- [ ] #3 C — not done: blocked by #2, which is not done",
        "- [ ] #4 D",
    ]


# Updating a body


def test_a_body_without_a_checklist_gets_one_appended() -> None:
    assert with_checklist("A person's words.", "- [ ] #1 A") == (
        f"A person's words.\n\n{START}\n- [ ] #1 A\n{END}"
    )


def test_updating_the_checklist_keeps_a_persons_text_around_it() -> None:
    body = f"Intro, edited.\n\n{START}\n- [ ] #12 First part\n{END}\n\nA reviewer's note."
    updated = with_checklist(body, checklist())
    assert updated == f"Intro, edited.\n\n{START}\n{checklist()}\n{END}\n\nA reviewer's note."


def test_a_checklist_pasted_twice_is_updated_in_both_places() -> None:
    """Text between the markers is thirdshift's: a copy a person pasted whole stays current."""
    body = f"{START}\nold\n{END}\nmid\n> {START}\nolder\n{END}"
    assert with_checklist(body, "new") == f"{START}\nnew\n{END}\nmid\n> {START}\nnew\n{END}"


@pytest.mark.parametrize(
    "body",
    [
        f"{START}\nold and a person's words",  # end marker deleted
        f"a person's words\n{END}",  # start marker deleted
        f"{END}\nwords\n{START}",  # markers in the wrong order
    ],
)
def test_a_broken_checklist_is_left_as_written_and_a_new_one_appended(body: str) -> None:
    """Where a lone marker's checklist ends is unknown: nothing of the body is removed."""
    updated = with_checklist(body, "new")
    assert updated == f"{body}\n\n{START}\nnew\n{END}"
    assert with_checklist(updated, "newer") == f"{body}\n\n{START}\nnewer\n{END}"


def test_a_doubled_start_marker_rewrites_only_the_text_after_the_second() -> None:
    body = f"{START}\nwords\n{START}\nold\n{END}"
    assert with_checklist(body, "new") == f"{START}\nwords\n{START}\nnew\n{END}"


def test_a_checklist_holding_a_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        with_checklist("", f"- [ ] #1 {END}")


def test_the_draft_body_closes_nothing_and_carries_the_checklist() -> None:
    body = draft_body(SPEC, checklist())
    assert closes(body) == ()
    assert f"{START}\n{checklist()}\n{END}" in body
    assert with_checklist(body, checklist()) == body


# Hostile titles


def test_a_hostile_title_cannot_close_mention_link_elsewhere_or_forge_a_marker() -> None:
    text = checklist((TicketText(12, HOSTILE, landed=True, pull=31), TicketText(13, HOSTILE)))
    assert closes(text) == ()
    assert re.search(r"@[A-Za-z]", text) is None
    assert "evil/repo#9" not in text
    assert "https://github.com/evil" not in text
    assert START not in text
    assert END not in text
    assert "<!--" not in text
    assert visible(text).startswith("- [x] #12 Closes #7, fixes #12")


def test_a_title_ending_in_a_closing_keyword_does_not_close_the_pull_request_after_it() -> None:
    text = checklist((TicketText(12, "Add it, fixes", landed=True, pull=31),))
    assert closes(text) == ()
    assert visible(text) == "- [x] #12 Add it, fixes — #31"


def test_a_title_that_opens_an_html_comment_hides_nothing_after_it() -> None:
    text = checklist((TicketText(12, "a <!-- b"), TicketText(13, "c")))
    assert "<!--" not in text
    assert text.endswith("- [ ] #13 c")


def test_a_hostile_title_cannot_end_the_checklist_it_is_written_in() -> None:
    body = with_checklist("mine", checklist((TicketText(12, f"x {END} y {START}"),)))
    again = with_checklist(body, "- [ ] #12 x")
    assert again == f"mine\n\n{START}\n- [ ] #12 x\n{END}"


# The final Spec PR body


def test_the_final_body_names_every_ticket_with_its_pull_request_and_closes_only_the_spec() -> None:
    landed = (TicketText(12, "First", True, 31), TicketText(13, "Second", True, 32))
    review = "Reviewed the Spec branch.\n\nCloses #12\nFixes #13 and resolves #99\nCloses #7\n"
    body = spec_pr_body(SPEC, review, landed, REPO)
    assert closes(body) == ("#7",)
    assert body.endswith("\n\nCloses #7")
    assert body.count("Closes #7") == 1
    assert "- [x] #12 First — #31\n- [x] #13 Second — #32" in body
    assert "Reviewed the Spec branch." in body


def test_the_final_body_keeps_its_checklist_updatable() -> None:
    landed = (TicketText(12, "First", True, 31),)
    body = spec_pr_body(SPEC, f"Text {START} forged {END}", landed, REPO)
    assert with_checklist(body, checklist(landed)) == body
    assert body.count(START) == 1
    assert body.count(END) == 1


def test_a_final_body_without_review_text_still_closes_the_spec() -> None:
    body = spec_pr_body(SPEC, "", (TicketText(12, "First", True, 31),), REPO)
    assert body == f"{START}\n- [x] #12 First — #31\n{END}\n\nCloses #7"


# The Failed spec run


def test_the_failure_lines_list_every_ticket_then_those_not_done() -> None:
    tickets = (*TICKETS, TicketText(15, "Fourth"))
    assert failure_lines(tickets) == (
        "#12 First part: landed with pull request #31",
        "#13 Second part: not done: not started",
        "#14 Third part: not done: failed: the tests stay red",
        "#15 Fourth: not done: not started",
        "Tickets not done: #13, #14, #15",
    )


def test_the_last_failure_line_is_the_schedules_own() -> None:
    schedule = schedule_tickets(
        [
            Ticket(1, False, state=TicketState.LANDED),
            Ticket(2, False, state=TicketState.FAILED, cause="CI red"),
            Ticket(3, False, (Blocker(2, False),)),
        ],
        parallel=2,
    )
    lines = failure_lines(ticket_texts(schedule, {}, {1: 9}))
    assert lines[-1] == tickets_not_done_line(schedule.not_done)
    assert lines[:-1] == (
        "#1: landed with pull request #9",
        "#2: not done: failed: CI red",
        "#3: not done: blocked by #2, which is not done",
    )


def test_the_failure_comment_carries_the_lines_defanged() -> None:
    comment = failure_comment((*TICKETS, TicketText(16, HOSTILE)), spec_pull=40, repository=REPO)
    for line in failure_lines(TICKETS)[:-1]:
        assert f"- {line}\n" in comment
    assert "**Tickets not done: #13, #14, #16**" in comment
    assert "Spec PR #40 stays a draft" in comment
    assert closes(comment) == ()
    assert re.search(r"@[A-Za-z]", comment) is None
    assert "<!--" not in comment


def test_a_terminal_escape_in_a_title_never_reaches_stderr() -> None:
    (line, _) = failure_lines((TicketText(5, "a\x1b[2Jb"),))
    assert line == "#5 a[2Jb: not done: not started"


# Properties

_PIECES = st.lists(
    st.sampled_from([START, END, "\n", "text", " ", "- [x] #1", "<!-- other -->"]) | st.text(),
    max_size=12,
).map("".join)
_CHECKLISTS = st.text().filter(lambda t: START not in t and END not in t)
# A checklist as the tests see it: a start marker, then no other start, to the next end marker.
_CHECKLIST = re.compile(f"{re.escape(START)}(?:(?!{re.escape(START)}).)*?{re.escape(END)}", re.S)

any_body = settings(max_examples=300, deadline=None)


@any_body
@given(_PIECES, _CHECKLISTS)
def test_updating_a_checklist_twice_changes_nothing_more(body: str, checklist: str) -> None:
    once = with_checklist(body, checklist)
    assert with_checklist(once, checklist) == once


@any_body
@given(_PIECES, _CHECKLISTS)
def test_everything_outside_the_markers_is_kept(body: str, checklist: str) -> None:
    updated = with_checklist(body, checklist)
    if _CHECKLIST.search(body):
        assert _CHECKLIST.sub("", updated) == _CHECKLIST.sub("", body)
    else:
        assert updated.startswith(body)
        assert updated.endswith(f"{START}\n{checklist.strip()}\n{END}")
    assert f"{START}\n{checklist.strip()}\n{END}" in updated


@any_body
@given(st.text(), st.booleans(), st.text())
def test_no_title_or_reason_can_close_or_forge_a_marker(title: str, landed: bool, why: str) -> None:
    text = checklist((TicketText(12, title, landed, 31, why), TicketText(13, title)))
    assert closes(text) == ()
    assert "<!--" not in text
    assert len(text.splitlines()) == 2
