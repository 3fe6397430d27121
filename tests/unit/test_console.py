"""The progress display: plain timestamped lines, and on a terminal one status line kept
under them."""

from __future__ import annotations

import io
import re
import time

from thirdshift.console import (
    LiveProgress,
    Progress,
    Status,
    format_duration,
    next_status,
    printable,
    progress_for,
    status_line,
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_follows_the_step_and_keeps_the_ci_count_until_ci_answers() -> None:
    status = next_status(Status(), "implement: $ pytest -q")
    assert status == Status(step="implement: $ pytest -q")
    status = next_status(status, "CI on abc1234: 2 of 3 checks still running")
    assert status.ci == "CI: 2 of 3 pending"
    status = next_status(status, "implement: Edit calc.py")
    assert status.ci == "CI: 2 of 3 pending"
    status = next_status(status, "CI passed on abc1234")
    assert status == Status(step="CI passed on abc1234")


def test_the_status_line_fits_the_terminal_and_shows_elapsed_time_first() -> None:
    status = Status(step="implement: $ " + "x" * 200, ci="CI: 1 of 2 pending")
    line = status_line(status, 125, 60)
    assert len(line) == 60
    assert line.startswith("▸ 2m 05s · CI: 1 of 2 pending · implement: $ xxx")
    assert line.endswith("…")
    assert status_line(Status(step="a\nb"), 3, 80) == "▸ 3s · a b"


def test_on_a_terminal_each_line_scrolls_up_and_the_status_is_redrawn_under_it() -> None:
    stream = Tty()
    now = [100.0]
    live = LiveProgress(stream, clock=lambda: now[0], tick_seconds=3600, width=lambda: 80)
    now[0] = 107.0
    live("implement: session started")
    live("CI on abc1234: 1 of 2 checks still running")
    live.close()

    out = stream.getvalue()
    lines = re.findall(r"\[\d\d:\d\d:\d\d\] ([^\n]*)\n", out)
    assert lines == ["implement: session started", "CI on abc1234: 1 of 2 checks still running"]
    assert "\r\x1b[2K▸ 7s · implement: session started" in out
    assert "▸ 7s · CI: 1 of 2 pending · CI on abc1234" in out
    assert out.endswith("\r\x1b[2K")  # closed: the status line is gone, the lines stay
    live("after the end")
    assert stream.getvalue().endswith("after the end\n")


def test_the_elapsed_time_is_redrawn_each_tick_while_no_line_arrives() -> None:
    """A session may print nothing for minutes: the status line still counts up."""
    stream = Tty()
    now = [100.0]
    live = LiveProgress(stream, clock=lambda: now[0], tick_seconds=0.01, width=lambda: 80)
    live("implement: session started")
    try:
        for elapsed in (65.0, 3725.0):
            now[0] = 100.0 + elapsed
            shown = f"\r\x1b[2K▸ {format_duration(elapsed)} · implement: session started"
            deadline = time.monotonic() + 5
            while shown not in stream.getvalue() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert shown in stream.getvalue()
    finally:
        live.close()
    assert len(re.findall(r"\[\d\d:\d\d:\d\d\] ", stream.getvalue())) == 1  # no new line


def test_plain_lines_off_a_terminal_and_one_line_ones_on_an_actions_runner() -> None:
    assert isinstance(progress_for(io.StringIO(), {}), Progress)
    assert isinstance(progress_for(Tty(), {"GITHUB_ACTIONS": "true"}), Progress)
    assert isinstance(progress_for(Tty(), {"TERM": "dumb"}), Progress)
    live = progress_for(Tty(), {"TERM": "xterm"})
    assert isinstance(live, LiveProgress)
    live.close()


def test_control_characters_an_agent_printed_are_shown_never_acted_on() -> None:
    """An OSC 52 clipboard write, a cursor move, a colour: shown as �; tabs and newlines kept."""
    clipboard = "\x1b]52;c;ZXZpbA==\x07"
    assert printable(f"a{clipboard}b\tc\nd\x9b2J") == "a\ufffd]52;c;ZXZpbA==\ufffdb\tc\nd\ufffd2J"
    stream = io.StringIO()
    Progress(stream)(f"implement: $ echo {clipboard}")
    assert "\x1b" not in stream.getvalue()
    assert "\x07" not in stream.getvalue()
