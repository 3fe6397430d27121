"""`thirdshift demo` (the daemon demo) with its options, each a demo of its own: another
Harness, `--keep`, and Ctrl-C while Runs are in flight. Apart from test_daemon_demo.py, whose
tests share one demo and so run on one worker: these may run beside it."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from tests.e2e.test_daemon_demo import DEMO_SECONDS, STATUS_LINE, Demo

pytestmark = pytest.mark.real_cli


def _port_open(url: str) -> bool:
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


def test_with_another_harness_the_daemon_demo_ends_with_each_pull_request(
    tmp_path: Path,
) -> None:
    """--harness codex: the same daemon demo on Codex's real CLI ends with exit 0 and a pull
    request URL for every issue in its summary."""
    other = Demo(tmp_path / "demo", "--harness", "codex", harness="codex")
    try:
        status = other.ended()
    finally:
        other.kill_if_running()

    assert status == 0, "\n".join(other.seen)
    rows = [re.split(r"\s{2,}", row) for row in other.stdout.strip().splitlines()[1:]]
    assert [r[1] for r in rows] == ["succeeded", "succeeded", "succeeded", "landed", "landed"]
    assert all("/demo/calculator/pull/" in r[2] for r in rows)


def test_with_keep_the_daemon_goes_on_after_the_summary_until_sigterm_stops_everything(
    tmp_path: Path,
) -> None:
    """--keep: the summary is printed once every issue is done, the daemon and its page serve
    on, and Chromium shows the page's charts, every Run linked, the CI-fix issue's Run with its
    Repair on the timeline and in the replay, and the Spec run's Ticket tree; SIGTERM stops the
    daemon, the page and both servers, with exit 0."""
    kept = Demo(tmp_path / "demo", "--keep")
    try:
        address = kept.first(STATUS_LINE)
        page = address[1]
        kept.first(r"every demo issue is done; the daemon keeps going", timeout=DEMO_SECONDS)
        seen = what_a_browser_sees(f"{page}?token={address[2]}", tmp_path / "screenshots")
        env = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (kept.root / "demo.env").read_text().splitlines()
        )
        assert _port_open(page)
        assert _port_open(env["THIRDSHIFT_GITHUB_API_URL"])
        kept.process.send_signal(signal.SIGTERM)
        status = kept.ended()
    finally:
        kept.kill_if_running()

    assert status == 0, "\n".join(kept.seen)
    outcomes = [re.split(r"\s{2,}", r)[1] for r in kept.stdout.strip().splitlines()[1:]]
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
    figures = report_of(kept.root / "home")
    assert figures == figures_of(runs_of(kept.root / "home")), figures
    assert figures["demo/calculator"]["outcomes"] == {"ready": 3, "merged": 2}
    assert not _port_open(page)
    assert not _port_open(env["THIRDSHIFT_GITHUB_API_URL"])


def test_ctrl_c_during_the_demo_stops_everything_and_summarizes_what_was_done(
    tmp_path: Path,
) -> None:
    """Ctrl-C while Runs are in flight: the daemon saves them as Failed runs, the page and both
    servers stop, the summary shows each issue's outcome so far, and the exit status is 1."""
    cut = Demo(tmp_path / "demo")
    try:
        page = cut.first(STATUS_LINE)[1]
        cut.first(r"implement: session started", timeout=DEMO_SECONDS)
        api = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (cut.root / "demo.env").read_text().splitlines()
        )["THIRDSHIFT_GITHUB_API_URL"]
        cut.process.send_signal(signal.SIGINT)
        status = cut.ended()
    finally:
        cut.kill_if_running()

    assert status == 1, "\n".join(cut.seen)
    header, *rows = cut.stdout.strip().splitlines()
    assert header.split()[0] == "issue"
    assert [row.split()[0] for row in rows][:3] == ["#1", "#2", "#3"]
    assert "succeeded" not in [row.split()[1] for row in rows]
    assert not _port_open(page)
    assert not _port_open(api)
