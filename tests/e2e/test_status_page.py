"""The daemon's status page in a real browser (Debian's chromium, driven by Playwright): it
shows a Run the test started while it works, and its outcome once it ends, without a reload and
without a console error, readable at desktop and phone widths; a Failed run beside it shows its
cause and its scrubbed last lines; the Run's own page, opened from its link, draws its timeline,
replays its sessions and hands over their raw logs. On loopback too, the page asks for a token:
the one the daemon made and printed with the page's address, or the configured ``http_token``.

The screenshots are kept for a person to look at: in ``$TEST_SCREENSHOTS_DIR`` when set, else in
the test's own temporary directory; the test prints where. With ``THIRDSHIFT_TEST_SCREENSHOTS``
set, the Run page's is also written to docs/images/run-page.png (the README shows it)."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from playwright.sync_api import ConsoleMessage, Error, Page, ViewportSize, sync_playwright

from tests.support.failed_run import CAUSE, plant_failed_run
from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    PROJECT,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from tests.support.warm_start import Started
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "add subtract(a, b), returning a - b"
CALC_WITH_SUBTRACT = CALC_FIXED + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"
TEST_SUBTRACT = (
    "import unittest\n\nfrom calc import subtract\n\n\n"
    "class SubtractTest(unittest.TestCase):\n"
    "    def test_subtracts(self) -> None:\n"
    "        self.assertEqual(subtract(5, 3), 2)\n"
)
REPAIR_MARKER = "CI is red on"
DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "run-page.png"
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


class Lines:
    """A running daemon's stderr, read as it comes (its page's address is printed at start)."""

    def __init__(self, process: Started) -> None:
        assert process.stderr is not None
        self._process = process
        self._arrived: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(process.stderr,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._arrived.put(line)
        self._arrived.put(None)

    def first(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first line matching ``pattern``, waiting for it."""
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
                raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(self.seen)}")
            self.seen.append(arrived)
            if found := re.search(pattern, arrived):
                return found

    def stop(self) -> str:
        """SIGTERM the daemon and give everything it wrote on stderr once it exited."""
        self._process.send_signal(signal.SIGTERM)
        self._process.wait(timeout=120)
        self._reader.join(timeout=30)
        while not self._arrived.empty():
            line = self._arrived.get_nowait()
            if line is not None:
                self.seen.append(line)
        return "".join(self.seen)


def printed_url(lines: Lines, port: int) -> tuple[str, str]:
    """The page's address the daemon printed with the token it made, and that token."""
    found = lines.first(rf"status page at (http://127\.0\.0\.1:{port}/\?token=([\w-]+))$")
    return found[1], found[2]


def answer(url: str, token: str | None = None) -> tuple[int, bytes]:
    """The status and body of a GET of ``url``, with ``Authorization: Bearer token`` if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10
        ) as got:
            return got.status, got.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def files_holding(root: Path, text: str) -> list[Path]:
    """Every file under ``root`` whose bytes hold ``text``."""
    wanted = text.encode()
    return [path for path in root.rglob("*") if path.is_file() and wanted in path.read_bytes()]


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
    # The implement session commits a test of subtract() but not subtract() itself (CI goes
    # red) and its Repair adds it: the Run's page has two sessions, one of them a Repair.
    test = bash(
        write_file_command("test_subtract.py", TEST_SUBTRACT)
        + " && git add test_subtract.py && git commit -qm 'Test subtract()'",
        "test",
    )
    fix = bash(
        write_file_command("calc.py", CALC_WITH_SUBTRACT) + " && git commit -qam 'Add subtract()'",
        "fix",
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [
                    {"tool_calls": [test]},
                    # long enough to be seen in flight, in the browser, at both widths
                    {
                        "tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")],
                        "delay_ms": 8000,
                    },
                    {"text": "Done."},
                ],
            },
            {
                "name": "repair",
                "marker": REPAIR_MARKER,
                "turns": [{"tool_calls": [fix]}, {"text": "subtract() is in."}],
            },
        ],
        files={**PROJECT, "calc.py": CALC_FIXED},
        issue_title="Add subtract()",
        issue_body=f"calc has add() only; {MARKER}.",
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
    lines = Lines(daemon)
    # No http_token is set: the browser opens the address the daemon printed, with its token.
    opened, page_token = printed_url(lines, port)
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
            page.goto(opened)
            assert page.url == url  # the token left the address bar
            # The Run the daemon picked up, in flight, with its condensed lines.
            page.wait_for_selector('article[data-run="2"][data-state="running"]', timeout=90_000)
            # The lines arrive as the session makes them: wait for the commit's, never sleep.
            page.wait_for_function(
                """() => {
                    const pre = document.querySelector('article[data-run="2"] pre');
                    return pre !== null && pre.innerText.split("\\n").includes("commit");
                }""",
                timeout=60_000,
            )
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
            page.wait_for_selector('tr[data-run="2"][data-state="succeeded"]', timeout=240_000)
            assert page.query_selector('article[data-run="2"]') is None
            shoot(page, "ended-phone", PHONE)
            shoot(page, "ended-desktop", DESKTOP)
            navigations = page.evaluate("performance.getEntriesByType('navigation').length")
            # The Run's own page, from its link: the timeline, the replay, the raw logs.
            page.click('tr[data-run="2"] a[href="runs/2"]')
            page.wait_for_url(f"{url}runs/2")
            run_page = read_run_page(page, shots / "session-log.jsonl")
            shoot(page, "run-page-phone", PHONE)
            shoot(page, "run-page", DESKTOP)
            if os.environ.get("THIRDSHIFT_TEST_SCREENSHOTS"):
                DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(DOCS_IMAGE), full_page=True)
        finally:
            browser.close()

    stderr = lines.stop()
    assert daemon.returncode == 0, stderr
    # The made token was printed once, on the page's line, and is nowhere in the home: not in
    # the state file, the Activity log, the Session logs or the database.
    assert stderr.count(page_token) == 1
    assert files_holding(world.home, page_token) == []
    assert problems == []
    assert navigations == 1  # one load: every change came in place
    shown = ("in-flight-desktop", "in-flight-phone", "ended-phone", "ended-desktop", "run-page")
    for name in (*shown, "run-page-phone"):
        assert (shots / f"{name}.png").stat().st_size > 0
    assert world.pulls()[0]["draft"] is False
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        sessions = store.run_sessions(2)
    finally:
        store.close()
    assert [s.kind for s in sessions] == ["implement", "repair-1"]
    assert run_page.bars == len(sessions)  # a bar per session, drawn
    assert run_page.painted
    assert run_page.repairs == ["2. repair-1"]
    assert "commit" in run_page.implement_calls
    assert any(call.startswith("$ printf '%s' 'Fix add()") for call in run_page.implement_calls)
    assert "commit" in run_page.repair_calls
    assert run_page.log_name == Path(sessions[0].log_path).name
    assert run_page.log_lines == Path(sessions[0].log_path).read_text().splitlines()
    assert all(json.loads(line) for line in run_page.log_lines)
    assert TOKEN not in run_page.html


@dataclass(frozen=True)
class ShownRunPage:
    """What a browser found on a Run's page."""

    html: str
    bars: int
    painted: bool
    repairs: list[str]
    implement_calls: list[str]
    repair_calls: list[str]
    log_name: str
    log_lines: list[str]


def read_run_page(page: Page, download_to: Path) -> ShownRunPage:
    """The Run page open in ``page``: its timeline drawn (the canvas holds painted pixels, and
    Chart.js a bar per session), its Repairs, the tool calls each session's replay lists, and
    the implement session's raw log as its link downloads it (saved to ``download_to``)."""
    page.wait_for_function(
        """() => {
            const canvas = document.getElementById("timeline");
            if (!canvas || !canvas.width || !canvas.height || !window.Chart) { return false; }
            const chart = Chart.getChart(canvas);
            return chart !== undefined && chart.data.datasets[0].data.length > 0;
        }""",
        timeout=30_000,
    )
    drawn = page.evaluate(
        """() => {
            const canvas = document.getElementById("timeline");
            const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
            let painted = false;
            for (let alpha = 3; alpha < pixels.data.length; alpha += 4) {
                if (pixels.data[alpha] !== 0) { painted = true; break; }
            }
            return { bars: Chart.getChart(canvas).data.datasets[0].data.length, painted };
        }"""
    )
    page.click('details[data-kind="implement"] > summary')  # the last session's is open
    calls = {
        kind: page.locator(
            f'details[data-kind="{kind}"] li[data-kind="tool_call"]'
        ).all_inner_texts()
        for kind in ("implement", "repair-1")
    }
    with page.expect_download() as started:
        page.click('details[data-kind="implement"] a.download')
    download = started.value
    download.save_as(download_to)
    return ShownRunPage(
        html=page.content(),
        bars=int(drawn["bars"]),
        painted=bool(drawn["painted"]),
        repairs=page.locator("#repairs tr[data-repair] td:first-child").all_inner_texts(),
        implement_calls=[text.strip() for text in calls["implement"]],
        repair_calls=[text.strip() for text in calls["repair-1"]],
        log_name=download.suggested_filename,
        log_lines=download_to.read_text().splitlines(),
    )


def idle_daemon(
    tmp_path: Path, worlds: list[RunWorld], bind: str = "127.0.0.1", **settings: str
) -> tuple[Lines, int]:
    """A daemon serving its page on ``bind`` (loopback) at a free port, whose issue never
    settles (no Run starts), with ``settings`` over the world's."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    world.settings.update(
        {"THIRDSHIFT_SETTLE_SECONDS": "3600", "THIRDSHIFT_MIN_FREE_DISK_MB": "0", **settings}
    )
    port = free_port()
    daemon = world.start_thirdshift(
        "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"{bind}:{port}"
    )
    lines = Lines(daemon)
    wait_until_served(f"http://127.0.0.1:{port}/", daemon)
    return lines, port


def test_on_loopback_the_page_asks_for_the_token_the_daemon_printed(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Without http_token the daemon makes a token and prints the page's address with it:
    without it every route but ``/healthz`` says 401 on loopback; the printed address opens
    the page (a cookie, then the page), and the token works as a Bearer token too."""
    lines, port = idle_daemon(tmp_path, worlds)
    url = f"http://127.0.0.1:{port}/"
    try:
        opened, page_token = printed_url(lines, port)
        refused = [answer(url + path)[0] for path in ("", "live", "api/status", "runs/1")]
        health = answer(url + "healthz")
        bearer, body = answer(url + "api/status", page_token)
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with browser.open(opened, timeout=10) as got:
            landed, html = got.url, got.read()
        with browser.open(url + "api/status", timeout=10) as got:
            by_cookie = got.status
    finally:
        stderr = lines.stop()
    assert refused == [401, 401, 401, 401]
    assert health == (200, b"ok\n")
    assert bearer == 200
    assert json.loads(body)["daemon"]["daemon"]
    assert (landed, by_cookie) == (url, 200)
    assert b'name="viewport"' in html
    assert len(page_token) >= 32
    assert stderr.count(page_token) == 1, stderr


def test_with_http_token_the_daemon_s_json_answers_only_to_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The token in the settings is the one the page asks for, on loopback too, and none is
    made: without it, or with another, ``/api/status`` says 401; with it, the JSON. The
    address is printed without a token."""
    page_token = "page-token-0123456789-abcdef"
    lines, port = idle_daemon(tmp_path, worlds, THIRDSHIFT_HTTP_TOKEN=page_token)
    url = f"http://127.0.0.1:{port}/"
    try:
        shown = lines.first(r"status page at \S+.*$")[0]
        without, said = answer(url + "api/status")
        wrong, _ = answer(url + "api/status", "page-token-0123456789-abcdeX")
        right, body = answer(url + "api/status", page_token)
    finally:
        stderr = lines.stop()
    assert (without, wrong, right) == (401, 401, 200)
    assert b"a token is required" in said
    assert page_token.encode() not in said
    assert json.loads(body)["daemon"]["daemon"]
    assert shown == f"status page at {url} (it asks for http_token)"
    assert "?token=" not in stderr
    assert page_token not in stderr


def this_host_s_address() -> str:
    """An address of one of this machine's own interfaces that is not loopback, as ``ip``
    lists it (told apart from how thirdshift finds them)."""
    listed = subprocess.run(
        ["ip", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True, check=True
    ).stdout
    found = re.findall(r"\binet6? ([0-9a-fA-F.:]+)/", listed)
    if not found:
        pytest.fail(f"this machine has no global address to name:\n{listed}", pytrace=False)
    ipv4 = [address for address in found if "." in address]
    chosen: str = (ipv4 or found)[0]
    return chosen


def answer_naming(port: int, host: str, token: str) -> tuple[int, bytes]:
    """``/api/status`` asked of 127.0.0.1 (nothing leaves this machine) with ``Host: host``, as
    a browser on another machine that opened the page by this host's address would send it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(
            "GET", "/api/status", headers={"Host": host, "Authorization": f"Bearer {token}"}
        )
        got = connection.getresponse()
        return got.status, got.read()
    finally:
        connection.close()


def test_bound_to_every_address_the_page_answers_a_request_naming_this_host_s_address(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """On 0.0.0.0 with http_token, a request whose Host is this machine's own address (as one
    from elsewhere on the network is) gets the JSON; one naming another host is still refused,
    and so is the token's absence."""
    page_token = "page-token-0123456789-abcdef"
    address = this_host_s_address()
    named = f"[{address}]:" if ":" in address else f"{address}:"
    lines, port = idle_daemon(
        tmp_path,
        worlds,
        bind="0.0.0.0",  # noqa: S104
        THIRDSHIFT_HTTP_TOKEN=page_token,
    )
    try:
        status, body = answer_naming(port, f"{named}{port}", page_token)
        elsewhere, _ = answer_naming(port, f"attacker.example:{port}", page_token)
        without, _ = answer_naming(port, f"{named}{port}", "not-the-token-0123456789")
    finally:
        lines.stop()
    assert status == 200, body
    assert json.loads(body)["daemon"]["daemon"]
    assert (elsewhere, without) == (400, 401)
