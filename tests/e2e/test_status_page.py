"""The daemon's status page in a real browser (Debian's chromium, driven by Playwright): it
shows a Run the test started while it works, and its outcome once it ends, without a reload and
without a console error, readable at desktop and phone widths."""

from __future__ import annotations

import shutil
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Error, sync_playwright

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: the status page is tested in a real browser; install "
            "it (Debian: apt-get install chromium)",
            pytrace=False,
        )
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_served(url: str, process_alive: object) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the status page never answered at {url}")


def test_the_status_page_follows_a_run_from_in_flight_to_its_outcome(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    fix = bash(
        write_file_command("calc.py", CALC_FIXED) + " && git commit -qam 'Make add() add'", "fix"
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [
                    {"tool_calls": [fix]},
                    # long enough to be seen in flight, in the browser
                    {
                        "tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")],
                        "delay_ms": 6000,
                    },
                    {"text": "Done."},
                ],
            }
        ],
    )
    worlds.append(world)
    world.settings.update(
        {
            "THIRDSHIFT_POLL_SECONDS": "1",
            "THIRDSHIFT_POLL_JITTER_SECONDS": "0",
            "THIRDSHIFT_SETTLE_SECONDS": "0",
            "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
        }
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    daemon = world.start_thirdshift(
        "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"127.0.0.1:{port}"
    )
    wait_until_served(url, daemon)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"console {message.type}: {message.text}")

    def on_page_error(error: Error) -> None:
        problems.append(f"page error: {error}")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", on_console)
            page.on("pageerror", on_page_error)
            page.goto(url)
            # The Run the daemon picked up, in flight, with its condensed lines.
            page.wait_for_selector('article[data-run="1"][data-state="running"]', timeout=90_000)
            page.wait_for_selector('article[data-run="1"] pre', timeout=30_000)
            assert "commit" in page.inner_text('article[data-run="1"] pre').splitlines()
            page.screenshot(path=str(shots / "in-flight-desktop.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.screenshot(path=str(shots / "in-flight-phone.png"), full_page=True)
            # The same page, never reloaded, shows the outcome once the Run ends.
            page.wait_for_selector('tr[data-run="1"][data-state="succeeded"]', timeout=120_000)
            assert page.query_selector('article[data-run="1"]') is None
            page.screenshot(path=str(shots / "ended-phone.png"), full_page=True)
            page.set_viewport_size({"width": 1280, "height": 900})
            page.screenshot(path=str(shots / "ended-desktop.png"), full_page=True)
            navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        finally:
            browser.close()

    daemon.send_signal(signal.SIGTERM)
    _, stderr = daemon.communicate(timeout=120)
    assert daemon.returncode == 0, stderr
    assert f"status page at {url}" in stderr
    assert problems == []
    assert navigations == 1  # one load: every change came in place
    assert sorted(p.name for p in shots.iterdir()) == [
        "ended-desktop.png",
        "ended-phone.png",
        "in-flight-desktop.png",
        "in-flight-phone.png",
    ]
    assert world.pulls()[0]["draft"] is False
