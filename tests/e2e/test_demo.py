"""`thirdshift demo`: both servers, a demo repository and a Ready issue, stopped by a signal."""

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


def _get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _port_open(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((parts.hostname or "", parts.port or 80)) == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_demo_sets_up_a_ready_issue_and_stops_cleanly(
    tmp_path: Path, home: Path, stop_signal: signal.Signals
) -> None:
    """The demo prints the issue URL on stdout, the issue is labelled ready-for-agent by a
    maintainer with write permission, CI ran the failing check on main, and Ctrl-C or SIGTERM
    stops both servers with exit 0."""
    root = tmp_path / "demo"
    demo = subprocess.Popen(
        [sys.executable, "-m", "thirdshift.cli", "demo", "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert demo.stdout is not None
        issue_url = demo.stdout.readline().strip()
        assert issue_url.endswith("/demo/calculator/issues/1"), issue_url
        env = dict(
            line.removeprefix("export ").split("=", 1)
            for line in (root / "demo.env").read_text().splitlines()
        )
        assert (root / "demo.env").stat().st_mode & 0o077 == 0
        api, token = env["THIRDSHIFT_GITHUB_API_URL"], env["GITHUB_TOKEN"]

        issue = _get(f"{api}/repos/demo/calculator/issues/1", token)
        assert issue["html_url"] == issue_url
        assert [label["name"] for label in issue["labels"]] == ["ready-for-agent"]
        events = _get(f"{api}/repos/demo/calculator/issues/1/events", token)
        labelled = [e for e in events if e["event"] == "labeled"]
        assert labelled[0]["actor"]["login"] == "maintainer"
        permission = _get(f"{api}/repos/demo/calculator/collaborators/maintainer/permission", token)
        assert permission["permission"] in {"write", "admin"}

        runs = _wait_for_ci(api, token)
        assert [(r["name"], r["conclusion"]) for r in runs] == [("unit tests", "failure")]
        assert _port_open(api)
        assert _port_open(env["ANTHROPIC_BASE_URL"])
    finally:
        demo.send_signal(stop_signal)
        _, stderr = demo.communicate(timeout=30)
    assert demo.returncode == 0, stderr
    assert "interrupted, stopping" in stderr
    assert token not in stderr
    assert not _port_open(api)
    assert not _port_open(env["ANTHROPIC_BASE_URL"])


def _wait_for_ci(api: str, token: str) -> list[dict[str, Any]]:
    """The check runs on main once they have all completed (the stand-in's CI is real work)."""
    deadline = time.monotonic() + 60
    while True:
        answer = _get(f"{api}/repos/demo/calculator/commits/main/check-runs", token)
        runs: list[dict[str, Any]] = answer["check_runs"]
        if runs and all(run["status"] == "completed" for run in runs):
            return runs
        assert time.monotonic() < deadline, f"CI did not complete: {runs}"
        time.sleep(0.2)
