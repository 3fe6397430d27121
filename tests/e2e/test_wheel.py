"""The package stands alone: ``scripts/wheel-check`` builds the sdist and the wheel, installs
the wheel into a fresh virtual environment outside the checkout, and runs ``--version``,
``config``, a migration of a new database and the single-Run demo from there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.real_cli import cli_path

pytestmark = pytest.mark.real_cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installed_outside_the_checkout_runs_the_single_run_demo(
    tmp_path: Path,
) -> None:
    """Everything the package reads at run time (migrations, prompts, templates, the npm
    locks) is in the wheel and the sdist, and the installed command works with no file of
    the checkout but the agent CLI."""
    cli_path("claude")  # fails, naming scripts/install, when the CLI is missing
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THIRDSHIFT_", "PYTHON"))}
    # A python3 on PATH that is not the one scripts/install chose (an older system Python,
    # say) must not be the one the fresh environment is made from.
    other = tmp_path / "other-python"
    other.mkdir()
    (other / "python3").write_text("#!/bin/sh\necho 'not the installed Python' >&2\nexit 1\n")
    (other / "python3").chmod(0o755)
    done = subprocess.run(
        [str(ROOT / "scripts" / "wheel-check")],
        env={**env, "TMPDIR": str(tmp_path), "PATH": f"{other}:{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stderr.splitlines()
    assert lines[-1] == "wheel-check: the wheel stands alone"
    assert any(line.startswith("wheel-check: the demo ended with http://") for line in lines)
    assert any("the new database is at revision" in line for line in lines)
