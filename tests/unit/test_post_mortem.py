"""The Post-mortem rules: condensed Session lines, one history line per Session, bounds,
scrubbing before cutting, and Markdown that a code span or fence in the text cannot break."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from thirdshift.records import SessionEvent, SessionRecord, Usage
from thirdshift.run_states import RunEnd, RunKind
from thirdshift.runs.rules.post_mortem import (
    LAST_LINES,
    LINE_CHARS,
    AnnouncedEnd,
    condensed,
    duration,
    fenced,
    history_line,
    markdown,
    post_mortem,
    run_end_notification,
    run_page_part,
    run_page_url,
    short_form,
)
from thirdshift.scrub import Scrubber

SECRET = "ghp_" + "PostMortem" * 4
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def session(kind: str = "implement", **fields: object) -> SessionRecord:
    values: dict[str, object] = {
        "id": 1,
        "run_id": 7,
        "kind": kind,
        "harness": "claude",
        "model": None,
        "harness_session_id": None,
        "resumed_from_id": None,
        "log_path": "/logs/x.jsonl",
        "state": "ended",
        "prompt": "p",
        "final_message": None,
        "killed_work": None,
        "error": None,
        "started_at": START,
        "ended_at": START + timedelta(seconds=72),
        "usage": Usage(cost_usd=0.0123, cost_source="reported", model="claude-sonnet-4"),
    }
    values.update(fields)
    return SessionRecord(**values)  # type: ignore[arg-type]


def event(seq: int, kind: str, summary: str, exit_status: int | None = None) -> SessionEvent:
    return SessionEvent(seq=seq, kind=kind, summary=summary, exit_status=exit_status)


def test_each_event_reads_as_the_progress_lines_show_it() -> None:
    """A tool call is its progress line; what came back is indented under it with a failing
    exit status; messages, results and errors are marked."""
    assert condensed(event(1, "tool_call", "$ pytest -q")) == "$ pytest -q"
    assert condensed(event(2, "tool_result", "1 failed", 1)) == "  ↳ exit 1: 1 failed"
    assert condensed(event(3, "tool_result", "ok", 0)) == "  ↳ ok"
    assert condensed(event(4, "message", "Fixing the\ntest")) == "agent: Fixing the test"
    assert condensed(event(5, "result", "Done.")) == "result: Done."
    assert condensed(event(6, "error", "max turns")) == "error: max turns"


def test_a_history_line_names_kind_harness_state_duration_and_cost() -> None:
    """One line per Session from its row and its usage ledger."""
    assert history_line(session()) == (
        "implement · claude (claude-sonnet-4) · ended · 1m 12s · $0.0123"
    )
    priced = session(usage=Usage(cost_usd=0.5, cost_source="price table"))
    assert history_line(priced).endswith("$0.5000 (priced by thirdshift)")
    running = session("repair-1", ended_at=None, state="running", usage=Usage())
    assert history_line(running) == "repair-1 · claude · running · still running · no cost reported"


def test_durations_read_in_seconds_minutes_and_hours() -> None:
    assert [duration(s) for s in (0, 42, 185, 3725)] == ["0s", "42s", "3m 05s", "1h 02m"]


def test_only_the_last_lines_are_kept_each_scrubbed_then_cut() -> None:
    """At most LAST_LINES lines of LINE_CHARS; a secret astride the cut is removed whole."""
    events = [event(i, "tool_call", f"$ step {i}") for i in range(1, 40)]
    long_one = event(40, "tool_result", "x" * (LINE_CHARS - 20) + SECRET)
    report = post_mortem(7, "it broke", [session()], [*events, long_one], Scrubber([SECRET]))
    assert len(report.last_lines) == LAST_LINES
    assert report.last_lines[0] == f"$ step {40 - LAST_LINES + 1}"
    assert len(report.last_lines[-1]) <= LINE_CHARS
    assert "ghp_" not in report.last_lines[-1]


def test_the_history_keeps_the_newest_sessions_and_counts_the_others() -> None:
    sessions = [session(f"repair-{i}") for i in range(1, 31)]
    report = post_mortem(7, None, sessions, [], Scrubber())
    assert len(report.history) == 20
    assert report.earlier_sessions == 10
    assert report.history[-1].startswith("repair-30 ")
    assert "…and 10 earlier Sessions" in "\n".join(markdown(report, None))


def test_markdown_fences_hold_whatever_backticks_the_agent_printed() -> None:
    """A line with a run of backticks cannot close the block early."""
    block = fenced(["$ echo '```'", "done"])
    assert block.startswith("````text\n")
    assert block.endswith("\n````")


def test_markdown_names_the_session_the_commands_to_see_more_and_the_log() -> None:
    report = post_mortem(7, "CI red", [session()], [event(1, "tool_call", "$ make")], Scrubber())
    text = "\n\n".join(markdown(report, "acme-widgets-issue-1-implement.jsonl"))
    assert "**What the agent did last** (Session `implement`)" in text
    assert "```text\n$ make\n```" in text
    assert "- `implement · claude (claude-sonnet-4) · ended · 1m 12s · $0.0123`" in text
    assert "`thirdshift show 7`" in text
    assert "`thirdshift logs 7`" in text
    assert "`acme-widgets-issue-1-implement.jsonl`" in text


def test_a_run_with_no_session_says_so() -> None:
    report = post_mortem(7, "pre-flight", [], [], Scrubber())
    assert "no Session ran" in markdown(report, None)[0]


def test_the_short_form_is_bounded_and_ends_with_where_to_see_more() -> None:
    events = [event(i, "tool_call", "$ " + "y" * 230) for i in range(1, 16)]
    sessions = [session(f"repair-{i}") for i in range(1, 30)]
    short = short_form(post_mortem(7, "c", sessions, events, Scrubber()))
    assert len(short) <= 2000
    assert short.startswith("Sessions: 29\n")
    assert "Last lines of repair-29:" in short


def test_a_run_end_message_carries_the_short_form_and_the_facts() -> None:
    report = post_mortem(7, "boom", [session()], [], Scrubber())
    notice = run_end_notification(
        run_id=7,
        repository="acme/widgets",
        issue_number=3,
        kind=RunKind.MERGE,
        end=AnnouncedEnd(
            "https://github.test/acme/widgets/issues/3",
            RunEnd.MERGED,
            None,
            "https://github.test/acme/widgets/pull/4",
            report,
        ),
        cost_usd=0.0123,
    )
    assert (notice.event, notice.state, notice.kind, notice.run_id) == (
        "run.ended",
        "merged",
        "merge",
        7,
    )
    assert notice.post_mortem == short_form(report)


def test_a_failed_run_comment_links_the_run_s_page_only_with_a_public_url() -> None:
    """With ``public_url`` the comment gets a part linking ``<public_url>/runs/<id>``;
    without it, nothing is linked."""
    assert run_page_url(None, 7) is None
    url = run_page_url("https://thirdshift.example.org/status", 7)
    assert url == "https://thirdshift.example.org/status/runs/7"
    assert run_page_part(url) == (
        "**The Run's page:** https://thirdshift.example.org/status/runs/7 (its timeline, each "
        "Session replayed, its Session logs)."
    )
