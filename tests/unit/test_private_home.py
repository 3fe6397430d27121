"""A Run's private agent home: the Harness's configuration copied in, its transcripts left
behind, and the variables pointing the CLI there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from thirdshift.harnesses import ClaudeHarness, CodexHarness, SealedPaths
from thirdshift.harnesses.agent_sandbox import bwrap_options


def test_claude_gets_its_login_and_nothing_else_of_the_users(tmp_path: Path) -> None:
    """~/.claude's credentials are copied; settings (which may hold MCP tokens), transcripts
    and ~/.claude.json are not."""
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
    assert (home / ".claude" / ".credentials.json").stat().st_mode & 0o777 == 0o600
    assert not (home / ".claude" / "settings.json").exists()
    assert not (home / ".claude.json").exists()
    assert not (home / ".claude" / "projects").exists()


def test_claude_with_its_own_config_dir_is_pointed_at_the_copy(tmp_path: Path) -> None:
    """CLAUDE_CONFIG_DIR is followed, and moved to the private home."""
    config = tmp_path / "cfg"
    config.mkdir()
    (config / ".credentials.json").write_text("{}")
    home = tmp_path / "agent"
    home.mkdir()

    variables = ClaudeHarness().private_home({"CLAUDE_CONFIG_DIR": str(config)}, home)

    assert variables["CLAUDE_CONFIG_DIR"] == str(home / ".claude")
    assert (home / ".claude" / ".credentials.json").exists()


def test_codex_gets_its_login_and_a_codex_home_of_its_own(tmp_path: Path) -> None:
    """CODEX_HOME's auth.json is copied; config.toml (which may hold MCP tokens), sessions/ and
    history are not; a file already in the private home (changed by an earlier session) is
    kept."""
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
    assert not (home / ".codex" / "config.toml").exists()
    assert (home / ".codex" / "auth.json").read_text() == '{"refreshed": true}'
    assert not (home / ".codex" / "history.jsonl").exists()
    assert not (home / ".codex" / "sessions").exists()


def test_a_link_the_agent_left_in_its_home_is_never_written_through(tmp_path: Path) -> None:
    """A dangling link where a copy would go: nothing is copied, the target is not made."""
    source = tmp_path / "codex"
    source.mkdir()
    (source / "auth.json").write_text("{}")
    home = tmp_path / "agent"
    (home / ".codex").mkdir(parents=True)
    target = tmp_path / "outside.txt"
    (home / ".codex" / "auth.json").symlink_to(target)

    CodexHarness().private_home({"CODEX_HOME": str(source)}, home)

    assert not target.exists()


def test_a_linked_directory_in_the_home_is_never_written_through(tmp_path: Path) -> None:
    """The agent replaced its .codex directory by a link: the login is not copied there."""
    source = tmp_path / "codex"
    source.mkdir()
    (source / "auth.json").write_text("{}")
    home = tmp_path / "agent"
    home.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / ".codex").symlink_to(outside)

    CodexHarness().private_home({"CODEX_HOME": str(source)}, home)

    assert not (outside / "auth.json").exists()


def test_a_hidden_directory_that_does_not_exist_is_left_out_of_the_seal(tmp_path: Path) -> None:
    """bubblewrap cannot make a mount point on the read-only root: only existing directories
    are hidden, each once, the outermost of nested ones."""
    home = tmp_path / "home"
    (home / "inner").mkdir(parents=True)
    paths = SealedPaths(
        worktree=tmp_path,
        clone=tmp_path,
        agent_home=tmp_path,
        hidden=(home, home / "inner", tmp_path / "missing"),
    )
    options = bwrap_options(paths)
    hidden = [options[i + 1] for i, option in enumerate(options) if option == "--tmpfs"]
    assert str(home) in hidden
    assert str(home / "inner") not in hidden
    assert str(tmp_path / "missing") not in hidden


def test_a_hidden_file_cannot_be_read_by_the_agent_under_bubblewrap(tmp_path: Path) -> None:
    """A GitHub App's key file is bound over last, so it stays unreadable wherever it lies,
    even inside a directory the agent may write (here the Worktree, which the test can place
    where bubblewrap binds it back)."""
    work = tmp_path / "work"
    key = work / "keys" / "app.pem"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nsecret\n-----END RSA PRIVATE KEY-----\n")
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is required (apt-get install bubblewrap)"

    def agent_reads(hidden: tuple[Path, ...]) -> subprocess.CompletedProcess[str]:
        paths = SealedPaths(worktree=work, clone=work, agent_home=work, hidden=hidden)
        argv = [bwrap, *bwrap_options(paths), "--", "cat", str(key)]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)

    assert "secret" in agent_reads(()).stdout  # the place is readable: the bind is what hides
    hidden = agent_reads((key,))
    assert "secret" not in hidden.stdout + hidden.stderr
    assert "secret" in key.read_text()  # thirdshift's own view is untouched
