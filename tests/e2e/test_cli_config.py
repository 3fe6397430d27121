"""The `thirdshift` command's contract around configuration: exit codes and messages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def thirdshift(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("thirdshift", path=str(Path(sys.executable).parent))
    assert executable, "the thirdshift console script is not installed in this environment"
    return subprocess.run(
        [executable, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return dict(os.environ)


def test_config_shows_the_settings_in_force_and_hides_the_token(
    env: dict[str, str], home: Path
) -> None:
    """`thirdshift config` opens the database and says whether a token is set, never its value."""
    env["GITHUB_TOKEN"] = "ghp_verysecretverysecretverysecret000000"
    result = thirdshift("config", env=env)
    assert result.returncode == 0, result.stderr
    assert f"home: {home}" in result.stdout
    assert "github token: set" in result.stdout
    assert "ghp_" not in result.stdout + result.stderr
    assert (home / "thirdshift.db").exists()


def test_an_unknown_key_exits_1_naming_the_file_and_key(env: dict[str, str], home: Path) -> None:
    """A typo in config.toml stops the command with exit 1 and a message naming both."""
    (home / "config.toml").write_text('github_api_ur = "http://127.0.0.1:1"\n')
    result = thirdshift("config", env=env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert str(home / "config.toml") in result.stderr
    assert "unknown key 'github_api_ur'" in result.stderr


def test_an_unreachable_database_exits_1_with_the_fix(env: dict[str, str]) -> None:
    """A database that cannot be opened is named (password hidden) with what to check."""
    env["THIRDSHIFT_DATABASE_URL"] = "postgresql://u:pw-secret@127.0.0.1:1/none"
    result = thirdshift("config", env=env)
    assert result.returncode == 1
    assert "THIRDSHIFT_DATABASE_URL" in result.stderr
    assert "pw-secret" not in result.stderr


def test_an_unknown_option_is_a_usage_error(env: dict[str, str]) -> None:
    """Command-line mistakes exit 2, as every usage error does."""
    result = thirdshift("config", "--no-such-flag", env=env)
    assert result.returncode == 2
    assert "--no-such-flag" in result.stderr


def test_config_says_the_agent_is_sealed_by_bubblewrap(env: dict[str, str]) -> None:
    """With bubblewrap installed, `thirdshift config` shows the agent sandbox in force."""
    result = thirdshift("config", env=env)
    assert result.returncode == 0, result.stderr
    assert "agent sandbox: bubblewrap" in result.stdout
    assert "model key: outside the sandbox, the model gateway adds it" in result.stdout


def test_config_without_bubblewrap_refuses_unless_the_unsafe_setting_allows(
    env: dict[str, str], tmp_path: Path
) -> None:
    """No bwrap on PATH: config exits 1 naming the fix; the unsafe setting shows the mode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env["PATH"] = f"{bin_dir}{os.pathsep}/nonexistent"
    result = thirdshift("config", env=env)
    assert result.returncode == 1
    assert "the agent sandbox cannot be made: bubblewrap (bwrap) is not installed" in result.stderr
    assert "unsafe_agent_without_sandbox = true" in result.stderr
    env["THIRDSHIFT_UNSAFE_AGENT_WITHOUT_SANDBOX"] = "true"
    result = thirdshift("config", env=env)
    assert result.returncode == 0, result.stderr
    assert "agent sandbox: none (unsafe_agent_without_sandbox)" in result.stdout


@pytest.mark.parametrize("address", ["0.0.0.0:8765", "[::]:8765", "192.0.2.10:8765"])
def test_a_status_page_beyond_loopback_without_a_token_is_refused_before_anything_starts(
    env: dict[str, str], address: str
) -> None:
    """The daemon names the rule and the setting, and stops before it asks GitHub anything (or
    listens anywhere): the GitHub it is pointed at does not even answer."""
    env["GITHUB_TOKEN"] = "ghp_verysecretverysecretverysecret000000"
    env["THIRDSHIFT_GITHUB_API_URL"] = "http://127.0.0.1:1"
    result = thirdshift("daemon", "--repo", "acme/widgets", "--http", address, env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        f"thirdshift: --http {address}: beyond loopback the status page needs a token; set "
        "THIRDSHIFT_HTTP_TOKEN (or http_token in the config file), or bind 127.0.0.1\n"
    )


def test_a_status_page_token_shorter_than_16_characters_is_refused_and_never_shown(
    env: dict[str, str],
) -> None:
    env["GITHUB_TOKEN"] = "ghp_verysecretverysecretverysecret000000"
    env["THIRDSHIFT_GITHUB_API_URL"] = "http://127.0.0.1:1"
    env["THIRDSHIFT_HTTP_TOKEN"] = "page-token-1234"  # 15 characters
    result = thirdshift("daemon", "--repo", "acme/widgets", "--http", "0.0.0.0:8765", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(
        "thirdshift: http_token is shorter than 16 characters; use a long random one"
    )
    assert "page-token-1234" not in result.stderr
