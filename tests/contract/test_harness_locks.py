"""The npm lock ``actions init`` writes beside the workflow installs the pinned Harness CLI
with real ``npm ci`` (from npm's cache, which ``scripts/install`` filled with the same
packages), so the workflow's install step is the one the tests run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from thirdshift.actions.pins import harness_lock, harness_manifest
from thirdshift.harness_registry import HARNESSES, HarnessEntry


@pytest.mark.parametrize("entry", HARNESSES, ids=[entry.name for entry in HARNESSES])
def test_npm_ci_on_the_written_lock_installs_the_pinned_harness_cli(
    tmp_path: Path, entry: HarnessEntry
) -> None:
    """npm ci refuses a lock that disagrees with its package.json or a package whose hash
    differs; here it installs, and the CLI it installed answers with the pinned version."""
    (tmp_path / "package.json").write_text(harness_manifest(entry))
    (tmp_path / "package-lock.json").write_text(harness_lock(entry))
    subprocess.run(
        ["npm", "ci", "--offline", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=tmp_path,
        check=True,
        timeout=300,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )
    cli = tmp_path / "node_modules" / ".bin" / entry.executable
    done = subprocess.run(
        [str(cli), "--version"], capture_output=True, text=True, check=True, timeout=60
    )
    assert entry.version in done.stdout
    # npm ci never rewrites the lock: what was reviewed is what was installed.
    assert (tmp_path / "package-lock.json").read_text() == harness_lock(entry)
