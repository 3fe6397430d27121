"""`thirdshift demo --keep` (the daemon demo) with the real Claude Code CLI: one demo shared by
this file's tests, watched from the outside as a newcomer would, its status page read in
Debian's chromium while the daemon works and once every issue is done, then stopped with
SIGTERM. Its other options, each a demo of its own, are in test_daemon_demo_options.py (the
demo that ends by itself is its Codex one)."""

from __future__ import annotations

import json
import math
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pytest
from playwright.sync_api import sync_playwright

from tests.e2e.test_demo import demo_env
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
        self._output_ended = False  # its stderr closed: no line will come
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
        while not self._output_ended:
            try:
                arrived = self._arrived.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if arrived is None:
                self._output_ended = True
                break
            self.seen.append(arrived)
            if found := re.search(pattern, arrived):
                return found
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.seen))

    def so_far(self) -> list[str]:
        """Every stderr line that has arrived, without waiting for more."""
        while True:
            try:
                arrived = self._arrived.get_nowait()
            except queue.Empty:
                return self.seen
            if arrived is None:
                self._output_ended = True
                return self.seen
            self.seen.append(arrived)

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


def port_open(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((parts.hostname or "", parts.port or 80)) == 0


@dataclass(frozen=True)
class Seen:
    """What Chromium showed of a finished demo's status page."""

    drawn_charts: set[str]
    """The charts drawn (painted pixels), their tables out of sight."""
    runs: dict[str, bool]
    """Each Run row of the front page, by its id: whether it links to the Run's page."""
    ci_fix_bars: int
    ci_fix_kinds: list[str]
    ci_fix_calls: int
    tickets: int
    ticket_runs: int
    tables: list[str]
    """The charts whose table shows with JavaScript off."""


DRAWN = """(key) => {
    const canvas = document.querySelector(`figure[data-chart="${key}"] canvas`);
    if (!canvas || !window.Chart || !Chart.getChart(canvas)) { return false; }
    const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
    for (let alpha = 3; alpha < pixels.data.length; alpha += 4) {
        if (pixels.data[alpha] !== 0) { return true; }
    }
    return false;
}"""


def what_a_browser_sees(url: str, shots: Path) -> Seen:
    """The front page and two Run pages of the finished demo, in Chromium, with a screenshot of
    each kept in ``shots``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (Debian: apt-get install chromium)", pytrace=False)
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector("figure.chart.drawn", timeout=60_000)
            keys = page.eval_on_selector_all(
                "figure.chart", "figures => figures.map(f => f.dataset.chart)"
            )
            drawn = {key for key in keys if page.evaluate(DRAWN, key)}
            # A drawn chart shows its drawing, not its table.
            shown_tables = {
                key
                for key in keys
                if page.locator(f'figure[data-chart="{key}"] table').is_visible()
            }
            runs = {
                row.get_attribute("data-run") or "": row.locator(
                    f'a[href="runs/{row.get_attribute("data-run")}"]'
                ).count()
                == 1
                for row in page.locator("tr[data-run]").all()
            }
            page.screenshot(path=str(shots / "front.png"), full_page=True)
            ci_fix = page.locator("tr[data-run]", has_text="demo/calculator#2").first
            ci_fix.locator("a").first.click()
            page.wait_for_function(
                """() => { const c = document.getElementById("timeline");
                    return window.Chart && c && Chart.getChart(c) !== undefined; }""",
                timeout=30_000,
            )
            bars = page.evaluate(
                """() => Chart.getChart(document.getElementById("timeline"))
                    .data.datasets[0].data.length"""
            )
            kinds = page.eval_on_selector_all(
                "details[data-kind]", "sessions => sessions.map(s => s.dataset.kind)"
            )
            calls = page.locator('li[data-kind="tool_call"]').count()
            page.screenshot(path=str(shots / "ci-fix-run.png"), full_page=True)
            page.go_back()
            spec = page.locator("tr[data-run]", has_text="demo/calculator#3").first
            spec.locator("a").first.click()
            page.wait_for_selector("#tickets", timeout=30_000)
            tickets = page.locator("#tickets li[data-ticket]").count()
            ticket_runs = page.locator("#tickets li[data-ticket-run] a").count()
            page.screenshot(path=str(shots / "spec-run.png"), full_page=True)
            # Without JavaScript each chart is its table.
            plain = browser.new_context(java_script_enabled=False).new_page()
            plain.goto(url)
            tables = [
                key
                for key in keys
                if plain.locator(f'figure[data-chart="{key}"] table').is_visible()
            ]
        finally:
            browser.close()
    return Seen(
        drawn - shown_tables, runs, int(bars), list(kinds), calls, tickets, ticket_runs, tables
    )


def _thirdshift(home: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")}
    env["THIRDSHIFT_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "thirdshift.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def report_of(home: Path) -> dict[str, dict[str, object]]:
    """``thirdshift report --json``'s figures per repository (the demo's Runs are all claude's)."""
    report = json.loads(_thirdshift(home, "report", "--since", "1d", "--json"))
    return {
        row["repository"]: {
            "outcomes": {k: v for k, v in row["outcomes"].items() if v},
            "pull_requests_ready": row["pull_requests_ready"],
            "cost_per_pull_request_usd": round(row["cost_per_pull_request_usd"], 6),
            "label_to_ready_median": row["label_to_ready"]["median_seconds"],
        }
        for row in report["rows"]
    }


def runs_of(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _thirdshift(home, "runs", "--json").splitlines()]


def ended(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["ended_at"])


def figures_of(runs: list[dict[str, Any]]) -> dict[str, dict[str, object]]:
    """The same figures computed here from each Run's own record (``runs --json``)."""
    by_repository: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_repository.setdefault(run["repository"], []).append(run)
    figures: dict[str, dict[str, object]] = {}
    for repository, own in by_repository.items():
        outcomes: dict[str, int] = {}
        for run in own:
            succeeded = run["state"] == "succeeded"
            outcome = (
                ("merged" if run["kind"] == "merge" else "ready") if succeeded else run["state"]
            )
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        ready = [r for r in own if r["state"] == "succeeded" and r["kind"] != "merge"]
        merged = [r for r in own if r["state"] == "succeeded" and r["kind"] == "merge"]
        pulls = {r["pull_request_number"] for r in ready + merged if r["pull_request_number"]}
        cost = sum(r["usage"]["cost_usd"] for r in own if r["usage"])
        waits = sorted(
            (
                datetime.fromisoformat(r["ended_at"])
                - datetime.fromisoformat(r["ready_labelled_at"])
            ).total_seconds()
            for r in ready
            if r["ready_labelled_at"]
        )
        figures[repository] = {
            "outcomes": outcomes,
            "pull_requests_ready": len({r["pull_request_number"] for r in ready}),
            "cost_per_pull_request_usd": round(cost / len(pulls), 6),
            # The nearest rank: the smallest wait with at least half at or below it.
            "label_to_ready_median": round(waits[math.ceil(len(waits) / 2) - 1], 3),
        }
    return figures


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = Demo(tmp_path_factory.mktemp("daemon-demo") / "demo", "--keep")
    try:
        yield running
    finally:
        running.kill_if_running()


@dataclass(frozen=True)
class Finished:
    """The shared demo taken to its end: what Chromium showed of the finished page, whether
    the page and the GitHub stand-in still served once every issue was done, and the exit
    status after SIGTERM."""

    seen: Seen | None
    """None when the browser could not read the page (``failure`` says why)."""
    failure: BaseException | None
    served: tuple[bool, bool]
    page: str
    api: str
    status: int


@pytest.fixture(scope="module")
def finished(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """Asked for by the tests after those that watch the demo at work: every issue done, the
    page read, then SIGTERM and the demo's end."""
    address = demo.first(STATUS_LINE)
    page = address[1]
    demo.first(r"every demo issue is done; the daemon keeps going", timeout=DEMO_SECONDS)
    api = demo_env(demo.root)["THIRDSHIFT_GITHUB_API_URL"]
    seen: Seen | None = None
    failure: BaseException | None = None
    try:
        seen = what_a_browser_sees(
            f"{page}?token={address[2]}", tmp_path_factory.mktemp("screenshots")
        )
    except Exception as error:  # the keep test's to report; the summary stands without it
        failure = error
    finally:
        served = (port_open(page), port_open(api))
        demo.process.send_signal(signal.SIGTERM)
    return Finished(seen, failure, served, page, api, demo.ended())


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
    # Read during the demo, not after it: with --keep the process lives on, so its own line
    # says whether every issue was done by then.
    assert not [line for line in demo.so_far() if "every demo issue is done" in line]


def test_the_summary_lists_every_issue_with_its_pull_request(
    demo: Demo, finished: Finished
) -> None:
    """Every issue's Run succeeded; stdout is the summary table: each issue with its pull
    request, the CI-fix issue with two sessions (implement and its Repair), the Spec with its
    Spec PR and, beneath it, its two Tickets, each landed by its own pull request."""
    status = finished.status

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


def test_with_keep_the_daemon_goes_on_after_the_summary_until_sigterm_stops_everything(
    demo: Demo, finished: Finished
) -> None:
    """--keep: once every issue is done the daemon and its page serve on, and Chromium shows
    the page's charts, every Run linked, the CI-fix issue's Run with its Repair on the timeline
    and in the replay, and the Spec run's Ticket tree; SIGTERM stops the daemon, the page and
    both servers, with exit 0."""
    if finished.failure is not None:
        raise finished.failure
    seen = finished.seen
    assert seen is not None
    assert finished.served == (True, True)
    assert finished.status == 0, "\n".join(demo.seen)
    outcomes = [re.split(r"\s{2,}", r)[1] for r in demo.stdout.strip().splitlines()[1:]]
    assert outcomes == ["succeeded"] * 3 + ["landed"] * 2
    # The front page: its charts drawn, and every Run listed links to its own page.
    assert seen.drawn_charts >= {"cost", "outcomes"}, seen
    assert set(seen.tables) >= {"cost", "outcomes"}, seen
    assert len(seen.runs) >= 5, seen.runs
    assert all(seen.runs.values()), seen.runs
    # The CI-fix issue's Run: its implement session and the Repair that made CI green.
    assert seen.ci_fix_bars == 2
    assert seen.ci_fix_kinds == ["implement", "repair-1"]
    assert seen.ci_fix_calls > 0
    # The Spec run: its two Tickets as a tree, each with its Ticket Run linked.
    assert seen.tickets == 2
    assert seen.ticket_runs >= 2
    # `thirdshift report` over the demo's database says what the Runs' own records say.
    figures = report_of(demo.root / "home")
    assert figures == figures_of(runs_of(demo.root / "home")), figures
    assert figures["demo/calculator"]["outcomes"] == {"ready": 3, "merged": 2}
    assert not port_open(finished.page)
    assert not port_open(finished.api)
