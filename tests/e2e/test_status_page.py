"""The daemon's status page in a real browser (Debian's chromium, driven by Playwright): it
shows a Run the test started while it works, and its outcome once it ends, without a reload and
without a console error, readable at desktop and phone widths; a Failed run beside it shows its
cause and its scrubbed last lines.

The screenshots are kept for a person to look at: in ``$TEST_SCREENSHOTS_DIR`` when set, else in
the test's own temporary directory; the test prints where."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Error, Page, ViewportSize, sync_playwright

from tests.support.failed_run import CAUSE, plant_failed_run
from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
PHONE = ViewportSize(width=390, height=844)
DESKTOP = ViewportSize(width=1280, height=900)
SMALLEST_TEXT_PX = 12.0
"""No text a person must read is smaller (the condensed lines' monospace is the smallest)."""
BODY_TEXT_PX = 14.0


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


def screenshot_dir(tmp_path: Path) -> Path:
    """Where the screenshots go: kept after the run for a person to look at."""
    chosen = os.environ.get("TEST_SCREENSHOTS_DIR")
    shots = Path(chosen) if chosen else tmp_path / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def layout_problems(page: Page, width: int) -> list[str]:
    """What makes the page hard to read at ``width``: a sideways scroll, or text too small."""
    measured = page.evaluate(
        """() => {
            const sizes = [];
            for (const element of document.body.querySelectorAll("*")) {
                const own = [...element.childNodes].some(
                    (node) => node.nodeType === Node.TEXT_NODE && node.textContent.trim());
                if (own && element.getClientRects().length) {
                    sizes.push([parseFloat(getComputedStyle(element).fontSize),
                                element.tagName + ": " + element.textContent.trim().slice(0, 40)]);
                }
            }
            sizes.sort((a, b) => a[0] - b[0]);
            return {
                scrollWidth: document.documentElement.scrollWidth,
                body: parseFloat(getComputedStyle(document.body).fontSize),
                smallest: sizes[0],
            };
        }"""
    )
    problems = []
    if measured["scrollWidth"] > width:
        problems.append(f"at {width}px the page scrolls sideways to {measured['scrollWidth']}px")
    if measured["body"] < BODY_TEXT_PX:
        problems.append(f"at {width}px body text is {measured['body']}px")
    if measured["smallest"][0] < SMALLEST_TEXT_PX:
        problems.append(
            f"at {width}px text is {measured['smallest'][0]}px: {measured['smallest'][1]}"
        )
    return problems


def test_the_status_page_follows_a_run_from_in_flight_to_its_outcome(
    tmp_path: Path, worlds: list[RunWorld], capsys: pytest.CaptureFixture[str]
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
                    # long enough to be seen in flight, in the browser, at both widths
                    {
                        "tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")],
                        "delay_ms": 8000,
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
    # An earlier Failed run (Run 1, on an issue no longer open) whose Session log names the
    # GitHub token: the page shows its cause and its last lines with the token scrubbed.
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        planted = plant_failed_run(store, OWNER, NAME, 9, world.home / "logs", TOKEN)
    finally:
        store.close()
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    daemon = world.start_thirdshift(
        "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"127.0.0.1:{port}"
    )
    wait_until_served(url, daemon)
    shots = screenshot_dir(tmp_path)
    with capsys.disabled():
        print(f"\nstatus page screenshots: {shots}")
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"console {message.type}: {message.text}")

    def on_page_error(error: Error) -> None:
        problems.append(f"page error: {error}")

    def shoot(page: Page, name: str, viewport: ViewportSize) -> None:
        page.set_viewport_size(viewport)
        problems.extend(
            f"{name}: {problem}" for problem in layout_problems(page, viewport["width"])
        )
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

    failed = f'article[data-run="{planted.run.id}"][data-state="failed"]'
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=DESKTOP)
            page.on("console", on_console)
            page.on("pageerror", on_page_error)
            page.goto(url)
            # The Run the daemon picked up, in flight, with its condensed lines.
            page.wait_for_selector('article[data-run="2"][data-state="running"]', timeout=90_000)
            page.wait_for_selector('article[data-run="2"] pre', timeout=30_000)
            assert "commit" in page.inner_text('article[data-run="2"] pre').splitlines()
            # The Failed run beside it: its cause, and its last lines with the token scrubbed.
            assert CAUSE in page.inner_text(failed)
            assert page.inner_text(f"{failed} pre").splitlines() == [
                "session started",
                "$ python3 -m unittest -v",
                "$ sed -i 's/a - b/a + b/' calc.py",
                '$ curl -H "Authorization: token [REDACTED]" https://ci.invalid/logs',
            ]
            assert "repair-2 · ended " in page.inner_text(failed)
            assert TOKEN not in page.content()
            shoot(page, "in-flight-desktop", DESKTOP)
            shoot(page, "in-flight-phone", PHONE)
            # The same page, never reloaded, shows the outcome once the Run ends.
            page.wait_for_selector('tr[data-run="2"][data-state="succeeded"]', timeout=120_000)
            assert page.query_selector('article[data-run="2"]') is None
            shoot(page, "ended-phone", PHONE)
            shoot(page, "ended-desktop", DESKTOP)
            navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        finally:
            browser.close()

    daemon.send_signal(signal.SIGTERM)
    _, stderr = daemon.communicate(timeout=120)
    assert daemon.returncode == 0, stderr
    assert f"status page at {url}" in stderr
    assert problems == []
    assert navigations == 1  # one load: every change came in place
    for name in ("in-flight-desktop", "in-flight-phone", "ended-phone", "ended-desktop"):
        assert (shots / f"{name}.png").stat().st_size > 0
    assert world.pulls()[0]["draft"] is False


def test_with_http_token_the_daemon_s_json_answers_only_to_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The token in the settings reaches the page the daemon serves (on loopback here, where
    it is optional): without it, or with another, ``/api/status`` says 401; with it, the JSON."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    page_token = "page-token-0123456789-abcdef"
    world.settings.update(
        {
            "THIRDSHIFT_HTTP_TOKEN": page_token,
            "THIRDSHIFT_SETTLE_SECONDS": "3600",  # the issue never settles: no Run starts
            "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
        }
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    daemon = world.start_thirdshift(
        "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"127.0.0.1:{port}"
    )
    wait_until_served(url, daemon)

    def status(token: str | None) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(url + "api/status", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read()

    try:
        without, said = status(None)
        wrong, _ = status("page-token-0123456789-abcdeX")
        right, body = status(page_token)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=120)
    assert (without, wrong, right) == (401, 401, 200)
    assert b"a token is required" in said
    assert page_token.encode() not in said
    assert json.loads(body)["daemon"]["daemon"]
    assert daemon.returncode == 0, stderr
    assert page_token not in stderr
