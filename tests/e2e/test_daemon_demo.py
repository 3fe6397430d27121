"""`thirdshift demo` (the daemon demo) with the real Claude Code CLI: one demo shared by this
file's tests, watched from the outside as a newcomer would, its status page read in Debian's
chromium while the daemon works. Its options, each a demo of its own, are in
test_daemon_demo_options.py."""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from playwright.sync_api import sync_playwright

from tests.support.real_cli import BIN_DIR, cli_path

pytestmark = pytest.mark.real_cli

# Waits are generous and configurable: the machine may be loaded (never assert less instead).
DEMO_SECONDS = float(os.environ.get("THIRDSHIFT_TEST_DEMO_SECONDS", "420"))
PAGE_MS = int(1000 * float(os.environ.get("THIRDSHIFT_TEST_PAGE_SECONDS", "180")))
STATUS_LINE = r"status page at (http://127\.0\.0\.1:\d+/)\?token=([\w-]+)$"


class Demo:
    """A running demo: its stderr lines read as they come, and its stdout once it ended."""

    def __init__(self, root: Path, *extra: str, harness: str = "claude") -> None:
        cli_path(harness)  # type: ignore[arg-type]
        env = {k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")}
        # As a newcomer runs it after scripts/install: .venv/bin/thirdshift, with a PATH that
        # lacks node_modules/.bin (thirdshift finds the CLIs its own install put there).
        env["PATH"] = os.pathsep.join(
            entry for entry in env["PATH"].split(os.pathsep) if Path(entry) != BIN_DIR
        )
        self.root = root
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "thirdshift"), "demo", "--root", str(root), *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.seen: list[str] = []
        self._arrived: queue.Queue[str | None] = queue.Queue()
        assert self.process.stderr is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stderr,), daemon=True)
        self._reader.start()
        self.stdout = ""

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._arrived.put(line.rstrip("\n"))
        self._arrived.put(None)

    def first(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        """The first stderr line matching ``pattern`` (after its time stamp), waiting for it."""
        deadline = time.monotonic() + timeout
        for line in self.seen:
            if found := re.search(pattern, line):
                return found
        while True:
            try:
                arrived = self._arrived.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                arrived = None
            if arrived is None:
                raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.seen))
            self.seen.append(arrived)
            if found := re.search(pattern, arrived):
                return found

    def ended(self) -> int:
        """Wait for the demo's own end; its exit status."""
        assert self.process.stdout is not None
        self.stdout = self.process.stdout.read()
        status = self.process.wait(timeout=DEMO_SECONDS)
        self._reader.join(timeout=30)
        while not self._arrived.empty():
            line = self._arrived.get_nowait()
            if line is not None:
                self.seen.append(line)
        return status

    def kill_if_running(self) -> None:
        """A demo that did not stop as it should is not left behind."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = Demo(tmp_path_factory.mktemp("daemon-demo") / "demo")
    try:
        yield running
    finally:
        running.kill_if_running()


def _message(line: str) -> str:
    return line.split("] ", 1)[1] if line.startswith("[") else line


def test_the_status_page_url_is_the_first_line_before_any_run_starts(demo: Demo) -> None:
    """The newcomer gets the page's address (with its token) first, before the sandbox is set
    up and before the daemon picks anything up."""
    demo.first(STATUS_LINE)
    demo.first(r"picked up; starting a Run", timeout=DEMO_SECONDS)
    assert re.search(STATUS_LINE, _message(demo.seen[0])), demo.seen[:3]


def test_a_browser_reads_the_page_during_the_demo_and_sees_runs_in_flight(demo: Demo) -> None:
    """Opened at the printed address while the demo runs, the page shows a Run in flight."""
    found = demo.first(STATUS_LINE)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (Debian: apt-get install chromium)", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(found[0].removeprefix("status page at "))
            page.wait_for_selector('article[data-state="running"]', timeout=PAGE_MS)
            in_flight = page.inner_text('article[data-state="running"]')
        finally:
            browser.close()
    assert "demo/calculator#" in in_flight
    assert demo.process.poll() is None  # read during the demo, not after it


def test_the_demo_ends_with_the_summary_and_every_issue_has_its_pull_request(
    demo: Demo,
) -> None:
    """Exit 0 once every issue's Run succeeded; stdout is the summary table: each issue with
    its pull request, the CI-fix issue with two sessions (implement and its Repair), the Spec
    with its Spec PR and, beneath it, its two Tickets, each landed by its own pull request."""
    status = demo.ended()

    assert status == 0, "\n".join(demo.seen)
    header, *rows = demo.stdout.strip().splitlines()
    assert header.split() == ["issue", "outcome", "pull", "request", "sessions", "time", "cost"]
    cells = [re.split(r"\s{2,}", row) for row in rows]
    assert [c[0] for c in cells] == ["#1", "#2", "#3", "#4 (Ticket of #3)", "#5 (Ticket of #3)"]
    assert [c[1] for c in cells] == ["succeeded", "succeeded", "succeeded", "landed", "landed"]
    assert all(
        re.fullmatch(r"http://127\.0\.0\.1:\d+/demo/calculator/pull/\d+", c[2]) for c in cells
    )
    assert [c[3] for c in cells] == ["1", "2", "1", "1", "1"]  # the Spec's: its Spec review
    assert len({c[2] for c in cells}) == 5  # a pull request each: the Spec's is the Spec PR
    assert any("picked up; starting a Spec run" in line for line in demo.seen)
    assert any("starting Repair 1 of" in line for line in demo.seen)
    token = re.search(STATUS_LINE, _message(demo.seen[0]))
    assert token is not None
    # The page's token is shown once, on its line, and nowhere else.
    assert sum(token[2] in line for line in demo.seen) == 1
