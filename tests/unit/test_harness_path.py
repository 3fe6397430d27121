"""Where the Harness CLIs are looked for: harness_paths, then the node_modules/.bin beside
thirdshift's virtual environment, then PATH; a daemon or demo missing one stops with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from thirdshift.bootstrap.harness_path import (
    check_harnesses,
    installed_cli_dir,
    search_path,
    with_harness_paths,
)
from thirdshift.errors import ConfigError, HarnessMissing
from thirdshift.settings import Settings, load_settings


def a_project(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout with a .venv and the CLIs scripts/install puts in node_modules/.bin."""
    venv = tmp_path / "checkout" / ".venv"
    venv.mkdir(parents=True)
    bin_dir = tmp_path / "checkout" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    return venv, bin_dir


def test_the_clis_beside_the_virtual_environment_are_found(tmp_path: Path) -> None:
    venv, bin_dir = a_project(tmp_path)
    assert installed_cli_dir(str(venv), "/usr") == bin_dir


def test_outside_a_virtual_environment_or_without_node_modules_nothing_is_added(
    tmp_path: Path,
) -> None:
    venv, bin_dir = a_project(tmp_path)
    assert installed_cli_dir(str(venv), str(venv)) is None
    bin_dir.rmdir()
    assert installed_cli_dir(str(venv), "/usr") is None


def test_harness_paths_come_first_then_the_install_then_path_each_once() -> None:
    first, install = Path("/opt/agents/bin"), Path("/srv/thirdshift/node_modules/.bin")
    path = os.pathsep.join(["/usr/bin", str(first), "/bin", ""])
    assert search_path([first, install, None], path) == os.pathsep.join(
        [str(first), str(install), "/usr/bin", "/bin"]
    )


def test_looking_twice_changes_nothing_more(tmp_path: Path) -> None:
    once = with_harness_paths({"PATH": "/usr/bin", "HOME": "/h"}, [tmp_path])
    assert with_harness_paths(once, [tmp_path]) == once
    assert once["HOME"] == "/h"
    assert once["PATH"].split(os.pathsep)[0] == str(tmp_path)


def settings(tmp_path: Path, **values: Any) -> Settings:
    return Settings(home=tmp_path / "home", github_token=SecretStr("t" * 20), **values)


def executable(directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    program = directory / name
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)


def test_a_daemon_missing_a_fallback_harness_stops_with_exit_2_naming_the_fix(
    tmp_path: Path,
) -> None:
    executable(tmp_path / "bin", "claude")
    chosen = settings(tmp_path, harness_fallbacks=["codex"])
    with pytest.raises(HarnessMissing) as raised:
        check_harnesses(chosen, {"PATH": str(tmp_path / "bin")})
    assert raised.value.exit_code == 2
    message = str(raised.value)
    assert message.startswith(
        "codex (the codex Harness, a fallback in harness_fallbacks) is not installed"
    )
    assert "npm install -g @openai/codex@" in message
    assert message.endswith("or take it out of harness_fallbacks")


def test_every_harness_a_daemon_may_run_found_lets_it_start(tmp_path: Path) -> None:
    executable(tmp_path / "bin", "claude")
    executable(tmp_path / "agents", "codex")
    chosen = settings(tmp_path, harness_fallbacks=["codex"], harness_paths=[tmp_path / "agents"])
    check_harnesses(
        chosen, with_harness_paths({"PATH": str(tmp_path / "bin")}, chosen.harness_paths)
    )


def test_a_relative_harness_path_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="THIRDSHIFT_HARNESS_PATHS") as raised:
        load_settings({"THIRDSHIFT_HOME": str(tmp_path), "THIRDSHIFT_HARNESS_PATHS": '["bin"]'})
    assert "is not an absolute path" in str(raised.value)


def test_a_harness_path_inside_thirdshift_s_home_is_refused_as_a_place_agents_write(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with pytest.raises(ConfigError, match="THIRDSHIFT_HARNESS_PATHS") as raised:
        load_settings(
            {
                "THIRDSHIFT_HOME": str(home),
                "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(home / "agent-homes" / "x" / "bin")]),
            }
        )
    assert "lies in thirdshift's home" in str(raised.value)
    assert "where agents write" in str(raised.value)
