"""The first hour of a newcomer: an install whose agent CLIs are missing makes the demo and the
daemon stop at once with exit 2 and the fix, instead of retrying an issue forever."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.run_world import python_without_clis

SYSTEM_PATH = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])


def thirdshift(python: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``thirdshift args`` of an install without node_modules, with only the system on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")}
    env["PATH"] = SYSTEM_PATH
    env["THIRDSHIFT_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [python, "-m", "thirdshift.cli", *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_demo_without_its_harness_cli_stops_before_any_server_with_exit_2(
    tmp_path: Path,
) -> None:
    root = tmp_path / "demo"
    result = thirdshift(python_without_clis(tmp_path), tmp_path, "demo", "--root", str(root))

    assert result.returncode == 2, result.stderr
    assert "claude (the claude Harness, the demo's --harness) is not installed" in result.stderr
    assert "run scripts/install in thirdshift's checkout" in result.stderr
    assert "harness_paths" not in result.stderr  # the demo's settings are its own
    # Nothing was started: no status page was announced, no stand-in made its repositories.
    assert "status page at" not in result.stderr
    assert not (root / "github").exists()


def test_a_daemon_with_a_harness_this_machine_lacks_exits_2_before_asking_github(
    tmp_path: Path,
) -> None:
    """codex is installed nowhere thirdshift looks; GitHub's address answers nothing, so a
    request made before the check would end otherwise."""
    python = python_without_clis(tmp_path)
    result = subprocess.run(
        [
            python,
            "-m",
            "thirdshift.cli",
            "daemon",
            "--repo",
            "acme/calculator",
            "--harness",
            "codex",
        ],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")},
            "PATH": SYSTEM_PATH,
            "THIRDSHIFT_HOME": str(tmp_path / "home"),
            "THIRDSHIFT_GITHUB_API_URL": "http://127.0.0.1:9",
            "GITHUB_TOKEN": "sandbox_not_a_real_token_0123456789",
        },
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 2, result.stderr
    assert "codex (the codex Harness, the Runs' Harness) is not installed" in result.stderr
    assert "npm install -g @openai/codex@" in result.stderr
    assert "127.0.0.1:9" not in result.stderr
