"""The managed clone attacked as an agent would: every configuration route that could send the
token elsewhere, git's credential helper asked for other hosts, history hidden from the
pre-push check, and a Worktree whose .git file points at a git directory of the agent's."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clones import FACTORY, plain_git, write_file
from tests.support.recorder import Recorder, recording_server
from tests.support.stand_in_scenario import TOKENS, Sandbox
from thirdshift.git import ManagedClone, own_git_dir


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    with recording_server("acme/widgets.git") as made:
        yield made


@pytest.mark.parametrize(
    "route",
    [
        "remote.origin.url",
        "remote.origin.pushurl",
        "url.insteadOf",
        "url.pushInsteadOf",
        "remote.origin.proxy",
        "http.proxy",
        "worktree-scoped url.insteadOf",
    ],
)
def test_no_route_in_the_clones_configuration_sends_the_token_elsewhere(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path, recorder: Recorder, route: str
) -> None:
    """Whatever an agent writes into the clone's configuration through its Worktree, the
    factory's fetch and push go to the configured GitHub, and the other server gets no
    credential."""
    worktree = clone.add_worktree(worktrees / "issue-4", "issue-4", "origin/main")
    where = worktree.path
    proxy = recorder.url.rsplit("/acme", 1)[0]
    if route == "remote.origin.url":
        plain_git(where, "config", "remote.origin.url", recorder.url)
    elif route == "remote.origin.pushurl":
        plain_git(where, "config", "remote.origin.pushurl", recorder.url)
    elif route == "url.insteadOf":
        plain_git(where, "config", f"url.{recorder.url}.insteadOf", clone.remote_url)
    elif route == "url.pushInsteadOf":
        plain_git(where, "config", f"url.{recorder.url}.pushInsteadOf", clone.remote_url)
    elif route == "remote.origin.proxy":
        plain_git(where, "config", "remote.origin.proxy", proxy)
    elif route == "http.proxy":
        plain_git(where, "config", "http.proxy", proxy)
    else:
        plain_git(where, "config", "extensions.worktreeConfig", "true")
        plain_git(where, "config", "--worktree", f"url.{recorder.url}.insteadOf", clone.remote_url)
    write_file(worktree, "w.txt", "w\n")
    worktree.commit_all("W")
    worktree.fetch("main")
    worktree.push("issue-4")
    assert clone.has_remote_branch("issue-4")
    assert recorder.authorizations == []


def test_the_credential_helper_answers_only_for_the_configured_host(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """git asking for the configured host and protocol gets the token; another host, another
    port or plain http for an https remote gets nothing."""
    from thirdshift.git.runner import _environment  # the helper's own wiring, under test

    configured = "https://github.example:8443/acme/widgets.git"
    env = {
        **os.environ,
        **_environment(FACTORY, TOKENS["wes"], (), configured, tmp_path, tmp_path, None),
    }
    for name in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY"):
        env.pop(name)

    def fill(protocol: str, host: str) -> str:
        done = subprocess.run(
            ["git", "credential", "fill"],
            input=f"protocol={protocol}\nhost={host}\npath=acme/widgets.git\n\n",
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout

    assert f"password={TOKENS['wes']}" in fill("https", "github.example:8443")
    for protocol, host in [
        ("https", "evil.example"),
        ("https", "github.example"),
        ("https", "github.example:8444"),
        ("http", "github.example:8443"),
        ("https", "github.example:8443.evil.example"),
    ]:
        assert TOKENS["wes"] not in fill(protocol, host), (protocol, host)


def test_added_lines_hide_nothing_from_the_pre_push_check(
    clone: ManagedClone, worktrees: Path
) -> None:
    """Lines a commit adds are all listed: in a file marked -diff, in a file with a NUL byte,
    a line that looks like a diff header, a line holding a carriage return, a form feed or
    another character Python would break a line at, a conflict resolution in a merge, and the
    commit messages; what is already on origin/main is not."""
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-9", "issue-9", "origin/main")
    where = worktree.path
    write_file(worktree, ".gitattributes", "*.bin -diff\n")
    write_file(worktree, "hidden.bin", "SECRET-IN-BINARY\n")
    (where / "nul.txt").write_bytes(b"a\x00b\nSECRET-AFTER-NUL\n")
    write_file(worktree, "header.txt", "++ SECRET-LOOKS-LIKE-HEADER\n")
    # Breaks that are no line break to git: what follows them is on the same added line, and
    # an "@@" after one is no hunk header.
    (where / "breaks.txt").write_bytes(
        b"a\rSECRET-AFTER-CR\nb\x0cSECRET-AFTER-FF\nc\xc2\x85SECRET-AFTER-NEL\nd\r@@ -1 +x @@\n"
    )
    worktree.commit_all("Add files\n\nSECRET-IN-MESSAGE")
    # A merge whose resolution adds a line of its own.
    plain_git(where, "checkout", "-q", "-b", "side")
    write_file(worktree, "both.txt", "side\n")
    worktree.commit_all("Side")
    plain_git(where, "checkout", "-q", "issue-9")
    write_file(worktree, "both.txt", "ours\n")
    worktree.commit_all("Ours")
    assert worktree.merge("side").status == "conflict"
    write_file(worktree, "both.txt", "SECRET-IN-RESOLUTION\n")
    worktree.commit_all("Merge side")

    added = worktree.added_lines("origin/main")

    texts = {(line.path, line.text) for line in added}
    assert ("hidden.bin", "SECRET-IN-BINARY") in texts
    assert any(line.path == "nul.txt" and "SECRET-AFTER-NUL" in line.text for line in added)
    assert ("header.txt", "++ SECRET-LOOKS-LIKE-HEADER") in texts
    assert ("breaks.txt", "a\rSECRET-AFTER-CR") in texts
    assert ("breaks.txt", "b\x0cSECRET-AFTER-FF") in texts
    assert ("breaks.txt", "c\x85SECRET-AFTER-NEL") in texts
    assert [line.line for line in added if line.path == "breaks.txt"] == [1, 2, 3, 4]
    assert ("both.txt", "SECRET-IN-RESOLUTION") in texts
    assert any(line.text == "SECRET-IN-MESSAGE" for line in added)
    assert not any(line.path == "README.md" for line in added)


def test_a_worktree_whose_git_file_points_elsewhere_is_opened_from_the_clone(
    clone: ManagedClone, worktrees: Path, tmp_path: Path
) -> None:
    """An agent rewrites the Worktree's .git file to a git dir of its own whose config runs a
    filter: thirdshift's git ignores the file and runs nothing of it."""
    clone.sync()
    path = worktrees / "issue-8"
    worktree = clone.add_worktree(path, "issue-8", "origin/main")
    evil = tmp_path / "evil.git"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True, timeout=60)
    ran = tmp_path / "ran.txt"
    with (evil / "config").open("a") as config:
        config.write(f'[filter "x"]\n\tclean = "touch {ran}; cat"\n')
    (path / ".gitattributes").write_text("* filter=x\n")
    (path / ".git").write_text(f"gitdir: {evil}\n")
    write_file(worktree, "y.txt", "y\n")

    assert clone.unpushed_work(path) == "uncommitted changes"
    worktree.commit_all("Y")
    assert not ran.exists()


def test_a_submodule_the_agent_plants_is_never_entered_by_thirdshifts_git(
    clone: ManagedClone, worktrees: Path, tmp_path: Path
) -> None:
    """A gitlink with its own .git/config defining a clean filter and an ext:: remote: status,
    commit and fetch run nothing of it."""
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-5", "issue-5", "origin/main")
    where = worktree.path
    ran = tmp_path / "ran.txt"
    sub = where / "x"
    subprocess.run(["git", "init", "-q", str(sub)], check=True, timeout=60)
    (sub / "f.txt").write_text("f\n")
    plain_git(sub, "add", "f.txt")
    plain_git(sub, "commit", "-q", "-m", "sub")
    with (sub / ".git" / "config").open("a") as config:
        config.write(f'[filter "ev"]\n\tclean = "touch {ran}; cat"\n')
        config.write('[protocol "ext"]\n\tallow = always\n')
        config.write(f'[remote "origin"]\n\turl = "ext::sh -c touch% {ran}"\n')
    (sub / ".gitattributes").write_text("* filter=ev\n")
    (sub / "f.txt").write_text("changed\n")
    modules = '[submodule "x"]\n\tpath = x\n\turl = ./x\n\tfetchRecurseSubmodules = true\n'
    write_file(worktree, ".gitmodules", modules)
    plain_git(where, "add", ".gitmodules", "x")

    worktree.is_dirty()
    worktree.commit_all("Add a submodule")
    worktree.fetch("main")
    worktree.fetch()

    assert not ran.exists()


def test_a_tag_named_like_origins_branch_does_not_hide_a_secret_from_the_check(
    clone: ManagedClone, worktrees: Path
) -> None:
    """The agent makes refs/tags/origin/main at its own head: the check still compares with
    origin's real main, so the secret it committed is found."""
    from thirdshift.runs.secret_check import SecretInCommits, push_checked
    from thirdshift.scrub import Scrubber

    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-6", "issue-6", "origin/main")
    token = "ghp_" + "T4g" * 12
    write_file(worktree, "settings.env", f"GITHUB_TOKEN={token}\n")
    worktree.commit_all("Settings")
    plain_git(worktree.path, "update-ref", "refs/tags/origin/main", "HEAD")
    plain_git(worktree.path, "branch", "origin/main", "HEAD")

    with pytest.raises(SecretInCommits) as caught:
        push_checked(worktree, "issue-6", "main", Scrubber().findings, lambda: None)
    assert "settings.env:1" in str(caught.value)
    assert not clone.has_remote_branch("issue-6")


def test_a_linked_object_directory_is_undone_before_thirdshifts_git_reads(
    clone: ManagedClone, worktrees: Path, tmp_path: Path
) -> None:
    """A link anywhere in the Worktree's repository (here, a loose-object directory pointing
    elsewhere), the one the agent writes, is removed before thirdshift's next git command."""
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-7", "issue-7", "origin/main")
    own = own_git_dir(worktree.path)
    elsewhere = tmp_path / "elsewhere-objects"
    elsewhere.mkdir()
    planted = own / "objects" / "zz"
    planted.symlink_to(elsewhere)
    (own / "refs" / "heads" / "linked").symlink_to(tmp_path / "some-ref")

    worktree.is_dirty()

    assert not planted.is_symlink()
    assert not (own / "refs" / "heads" / "linked").is_symlink()
    assert elsewhere.exists()


def test_a_fifo_the_agent_left_as_packed_refs_is_removed_before_thirdshifts_git_blocks_on_it(
    clone: ManagedClone, worktrees: Path
) -> None:
    """git would block reading a FIFO at packed-refs until its timeout: a file of the
    Worktree's repository that is neither a file nor a directory is removed before thirdshift's
    next git command, which then answers at once."""
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-8", "issue-8", "origin/main")
    own = own_git_dir(worktree.path)
    packed = own / "packed-refs"
    packed.unlink(missing_ok=True)
    os.mkfifo(packed)

    assert worktree.is_dirty() is False

    assert not packed.exists()


@pytest.mark.parametrize(
    "where", ["objects/info/alternates", "objects/info/http-alternates", "info/grafts", "shallow"]
)
def test_a_directory_planted_where_git_reads_a_list_is_removed_before_thirdshifts_git(
    clone: ManagedClone, worktrees: Path, where: str
) -> None:
    """A directory (with a file in it) where git reads alternates, grafts or the shallow list
    of the Worktree's repository, the one the agent writes, is removed like a file would be:
    thirdshift's next git command answers, and the one alternate is written back."""
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-9", "issue-9", "origin/main")
    own = own_git_dir(worktree.path)
    alternates = own / "objects" / "info" / "alternates"
    borrowed = alternates.read_text()
    planted = own / where
    planted.unlink(missing_ok=True)
    (planted / "inside").mkdir(parents=True)
    (planted / "inside" / "list").write_text("/elsewhere/objects\n")

    assert worktree.is_dirty() is False

    assert not planted.is_dir()
    assert alternates.read_text() == borrowed
