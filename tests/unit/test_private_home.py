"""A Run's private agent home: the Harness's configuration copied in, its transcripts left
behind, and the variables pointing the CLI there."""

from __future__ import annotations

from pathlib import Path

from thirdshift.harnesses import ClaudeHarness, CodexHarness


def test_claude_gets_its_settings_and_login_but_not_the_users_transcripts(tmp_path: Path) -> None:
    """~/.claude's settings and credentials and ~/.claude.json are copied; projects/ is not."""
    user = tmp_path / "user"
    (user / ".claude" / "projects" / "other-repo").mkdir(parents=True)
    (user / ".claude" / "settings.json").write_text('{"theme": "dark"}')
    (user / ".claude" / ".credentials.json").write_text('{"oauth": "x"}')
    (user / ".claude" / "projects" / "other-repo" / "t.jsonl").write_text("old talk")
    (user / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    home = tmp_path / "agent"
    home.mkdir()

    variables = ClaudeHarness().private_home({"HOME": str(user)}, home)

    assert variables == {"HOME": str(home)}
    assert (home / ".claude" / "settings.json").read_text() == '{"theme": "dark"}'
    assert (home / ".claude" / ".credentials.json").stat().st_mode & 0o777 == 0o600
    assert (home / ".claude.json").exists()
    assert not (home / ".claude" / "projects").exists()


def test_claude_with_its_own_config_dir_is_pointed_at_the_copy(tmp_path: Path) -> None:
    """CLAUDE_CONFIG_DIR is followed, and moved to the private home."""
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "settings.json").write_text("{}")
    home = tmp_path / "agent"
    home.mkdir()

    variables = ClaudeHarness().private_home({"CLAUDE_CONFIG_DIR": str(config)}, home)

    assert variables["CLAUDE_CONFIG_DIR"] == str(home / ".claude")
    assert (home / ".claude" / "settings.json").exists()


def test_codex_gets_its_config_and_login_and_a_codex_home_of_its_own(tmp_path: Path) -> None:
    """CODEX_HOME's config.toml and auth.json are copied; sessions/ and history are not; a file
    already in the private home (changed by an earlier session) is kept."""
    source = tmp_path / "codex"
    (source / "sessions").mkdir(parents=True)
    (source / "config.toml").write_text('model = "x"\n')
    (source / "auth.json").write_text("{}")
    (source / "history.jsonl").write_text("old prompts")
    (source / "sessions" / "rollout.jsonl").write_text("old rollout")
    home = tmp_path / "agent"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text('{"refreshed": true}')

    variables = CodexHarness().private_home({"CODEX_HOME": str(source)}, home)

    assert variables == {"HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    assert (home / ".codex" / "config.toml").read_text() == 'model = "x"\n'
    assert (home / ".codex" / "auth.json").read_text() == '{"refreshed": true}'
    assert not (home / ".codex" / "history.jsonl").exists()
    assert not (home / ".codex" / "sessions").exists()
