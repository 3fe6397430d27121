"""`thirdshift demo` (the daemon demo) with its options, each a demo of its own: another
Harness (a demo that ends by itself), and Ctrl-C while Runs are in flight. Apart from
test_daemon_demo.py, whose tests share one demo (with `--keep`) and so run on one worker: these
may run beside it."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.e2e.test_daemon_demo import DEMO_SECONDS, STATUS_LINE, Demo, port_open
from tests.e2e.test_demo import demo_env

pytestmark = pytest.mark.real_cli


def test_with_another_harness_the_daemon_demo_ends_with_each_pull_request(
    tmp_path: Path,
) -> None:
    """--harness codex: the same daemon demo on Codex's real CLI ends by itself with exit 0
    and a pull request URL for every issue in its summary, its page and servers stopped."""
    other = Demo(tmp_path / "demo", "--harness", "codex", harness="codex")
    try:
        page = other.first(STATUS_LINE)[1]
        other.first(r"picked up; starting a Run", timeout=DEMO_SECONDS)
        api = demo_env(other.root)["THIRDSHIFT_GITHUB_API_URL"]
        status = other.ended()
    finally:
        other.kill_if_running()

    assert status == 0, "\n".join(other.seen)
    rows = [re.split(r"\s{2,}", row) for row in other.stdout.strip().splitlines()[1:]]
    assert [r[1] for r in rows] == ["succeeded", "succeeded", "succeeded", "landed", "landed"]
    assert all("/demo/calculator/pull/" in r[2] for r in rows)
    # Ended by itself, it leaves nothing serving.
    assert not port_open(page)
    assert not port_open(api)


def test_ctrl_c_during_the_demo_stops_everything_and_summarizes_what_was_done(
    tmp_path: Path,
) -> None:
    """Ctrl-C while Runs are in flight: the daemon saves them as Failed runs, the page and both
    servers stop, the summary shows each issue's outcome so far, and the exit status is 1."""
    cut = Demo(tmp_path / "demo")
    try:
        page = cut.first(STATUS_LINE)[1]
        cut.first(r"implement: session started", timeout=DEMO_SECONDS)
        api = demo_env(cut.root)["THIRDSHIFT_GITHUB_API_URL"]
        cut.process.send_signal(signal.SIGINT)
        status = cut.ended()
    finally:
        cut.kill_if_running()

    assert status == 1, "\n".join(cut.seen)
    header, *rows = cut.stdout.strip().splitlines()
    assert header.split()[0] == "issue"
    assert [row.split()[0] for row in rows][:3] == ["#1", "#2", "#3"]
    assert "succeeded" not in [row.split()[1] for row in rows]
    assert not port_open(page)
    assert not port_open(api)
