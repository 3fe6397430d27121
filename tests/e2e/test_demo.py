"""`thirdshift demo --run`: both servers, a demo repository and a Ready issue, and a whole Run on it
with the real Claude Code CLI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import BIN_DIR, cli_path

pytestmark = pytest.mark.real_cli


def _get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _port_open(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((parts.hostname or "", parts.port or 80)) == 0


def _demo(root: Path, *extra: str) -> subprocess.Popen[str]:
    cli_path("claude")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")}
    env["PATH"] = f"{BIN_DIR}{os.pathsep}{env['PATH']}"
    return subprocess.Popen(
        [sys.executable, "-m", "thirdshift.cli", "demo", "--run", "--root", str(root), *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _kill_if_running(process: subprocess.Popen[str]) -> None:
    """A demo that did not stop as it should is not left behind."""
    if process.poll() is None:
        process.kill()
        process.communicate()


def demo_env(root: Path) -> dict[str, str]:
    """The variables the demo writes for a person to source (its servers' addresses)."""
    return dict(
        line.removeprefix("export ").split("=", 1)
        for line in (root / "demo.env").read_text().splitlines()
    )


def test_the_demo_runs_thirdshift_to_a_ready_green_pull_request(tmp_path: Path) -> None:
    """Exit 0, the pull request URL on stdout; stderr shows the pull request's state, its
    checks and the Session log; the issue was labelled ready-for-agent by a maintainer with
    write permission before thirdshift took it."""
    root = tmp_path / "demo"
    demo = _demo(root)
    try:
        stdout, stderr = demo.communicate(timeout=240)
    finally:
        _kill_if_running(demo)

    assert demo.returncode == 0, stderr
    assert stdout.strip().endswith("/demo/calculator/pull/2"), stdout
    assert "pull request #2: open, issue-1 into main" in stderr
    assert "check 'unit tests' on " in stderr
    assert ": success" in stderr
    session_log = stderr.strip().splitlines()[-1].split("] ", 1)[1]
    assert session_log.startswith("session log: ")
    assert Path(session_log.removeprefix("session log: ")).exists()
    assert (root / "demo.env").stat().st_mode & 0o077 == 0
    token = demo_env(root)["GITHUB_TOKEN"]
    assert token not in stderr
    assert "labelled ready-for-agent by maintainer" in stderr


@pytest.mark.parametrize(
    ("harness", "label", "tool"),
    [
        ("codex", "Codex", "exec_command"),
        ("opencode", "OpenCode", "bash"),
        ("qwen", "Qwen Code", "run_shell_command"),
    ],
)
def test_the_demo_with_another_harness_ends_with_a_pull_request_url(
    tmp_path: Path, harness: str, label: str, tool: str
) -> None:
    """--harness NAME: the same demo on that Harness's real CLI, its script's tool calls named
    as that CLI names its shell tool; exit 0 and the pull request URL on stdout."""
    root = tmp_path / "demo"
    cli_path(harness)  # type: ignore[arg-type]
    demo = _demo(root, "--harness", harness)
    try:
        stdout, stderr = demo.communicate(timeout=240)
    finally:
        _kill_if_running(demo)

    assert demo.returncode == 0, stderr
    assert stdout.strip().endswith("/demo/calculator/pull/2"), stdout
    assert f"with the real {label} CLI" in stderr
    assert "check 'unit tests' on " in stderr
    script = json.loads((root / "model-script.json").read_text())
    calls = [c for t in script["sessions"][0]["turns"] for c in t.get("tool_calls", [])]
    assert {c["name"] for c in calls} == {tool}


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_with_keep_the_servers_stay_up_until_ctrl_c_or_sigterm(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    """--keep serves the stand-in and the model server after the Run so a person can look
    around; Ctrl-C or SIGTERM stops both and the demo exits with the Run's status."""
    root = tmp_path / "demo"
    demo = _demo(root, "--keep")
    try:
        assert demo.stdout is not None
        pull_url = demo.stdout.readline().strip()
        assert pull_url.endswith("/demo/calculator/pull/2")
        env = demo_env(root)
        api, token = env["THIRDSHIFT_GITHUB_API_URL"], env["GITHUB_TOKEN"]
        deadline = time.monotonic() + 30
        while True:  # the outcome lines follow the URL; then the servers keep serving
            pull = _get(f"{api}/repos/demo/calculator/pulls/2", token)
            if pull["state"] == "open":
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        events = _get(f"{api}/repos/demo/calculator/issues/1/events", token)
        labelled = [e for e in events if e["event"] == "labeled"]
        assert labelled[0]["actor"]["login"] == "maintainer"
        assert labelled[0]["label"]["name"] == "ready-for-agent"
        assert _port_open(api)
        assert _port_open(env["ANTHROPIC_BASE_URL"])
        assert demo.stderr is not None
        before = []
        for line in demo.stderr:  # wait for the demo to say it is only serving now
            before.append(line)
            if "press Ctrl-C to stop" in line:
                break
        assert "the demo's servers are still up; press Ctrl-C to stop" in before[-1]
    finally:
        demo.send_signal(stop_signal)
        try:
            _, stderr = demo.communicate(timeout=60)
        finally:
            _kill_if_running(demo)
    assert demo.returncode == 0, stderr
    assert "interrupted, stopping" in stderr
    assert not _port_open(api)
    assert not _port_open(env["ANTHROPIC_BASE_URL"])
