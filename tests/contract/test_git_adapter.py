"""The managed clone and its Worktrees against real git over smart HTTP (the GitHub stand-in).

Every test runs real ``git`` through ``thirdshift.git.clone`` against the stand-in's bare
repositories, which check the token and refuse non-fast-forward pushes. ``sandbox.push`` plays
someone else pushing to the same repository.

Over 500 lines on purpose: one test per behaviour of the clone and its Worktrees, which read
best next to each other and share one set of fixtures.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clones import FACTORY, make_clone, plain_git, write_file
from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, TOKENS, Sandbox
from thirdshift.errors import GitError, PushRejected
from thirdshift.git import ManagedClone, MergeOutcome, own_git_dir
from thirdshift.scrub import Scrubber


def test_sync_clones_on_first_use_then_fetches_new_commits(sandbox: Sandbox, home: Path) -> None:
    """The first sync makes a bare clone under repos/<owner>/<name>; later ones fetch."""
    clone = make_clone(sandbox, home)
    assert clone.path == home / "repos" / OWNER / NAME
    assert not clone.path.exists()
    clone.sync()
    assert plain_git(clone.path, "rev-parse", "--is-bare-repository") == "true"
    assert plain_git(clone.path, "rev-parse", "refs/remotes/origin/main") == sandbox.main_sha
    moved = sandbox.push("main", {"NEWS.md": "news\n"})
    clone.sync()
    assert plain_git(clone.path, "rev-parse", "refs/remotes/origin/main") == moved


def test_sync_prunes_branches_deleted_on_origin(sandbox: Sandbox, clone: ManagedClone) -> None:
    """A branch gone from origin is gone from the clone's remote-tracking branches, and from
    the branches sync returns."""
    pushed = sandbox.push("issue-2", {"a.txt": "a\n"})
    assert clone.sync() == {"main": sandbox.main_sha, "issue-2": pushed}
    assert plain_git(clone.path, "branch", "--remotes", "--list", "origin/issue-2")
    sandbox.github().get_repo(FULL_NAME).get_git_ref("heads/issue-2").delete()
    assert clone.sync() == {"main": sandbox.main_sha}
    assert not plain_git(clone.path, "branch", "--remotes", "--list", "origin/issue-2")


def test_remote_branches_asks_origin_now(sandbox: Sandbox, clone: ManagedClone) -> None:
    """remote_branches and has_remote_branch see a branch pushed after the last sync."""
    assert clone.remote_branches() == {"main": sandbox.main_sha}
    pushed = sandbox.push("issue-7", {"feature.txt": "one\n"})
    assert clone.remote_branches() == {"main": sandbox.main_sha, "issue-7": pushed}
    assert clone.has_remote_branch("issue-7")
    assert not clone.has_remote_branch("issue-8")
    assert not clone.has_remote_branch("issue")


def test_token_is_in_no_file_of_the_clone_nor_in_its_remote_url(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """After fetch, worktree and push, no file of the clone or Worktree holds the token."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("Add x")
    worktree.push("issue-1")
    url = f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"
    assert plain_git(clone.path, "config", "--get", "remote.origin.url") == url
    config = (clone.path / "config").read_text()
    assert "helper" not in config
    token = TOKENS["wes"].encode()
    for root in (clone.path, own_git_dir(worktree.path), worktree.path):
        for path in root.rglob("*"):
            if path.is_file():
                assert token not in path.read_bytes(), path


def test_git_argv_never_carries_the_token(
    sandbox: Sandbox, home: Path, tmp_path: Path, worktrees: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git wrapper first on PATH logs every argv: the token is in none of them."""
    real_git = shutil.which("git")
    assert real_git is not None
    log = tmp_path / "argv.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real_git}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    clone = make_clone(sandbox, home)
    clone.sync()
    clone.remote_branches()
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("Add x")
    worktree.fetch("main")
    worktree.push("issue-1")

    logged = log.read_text()
    url = f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"
    assert f"fetch --prune --quiet {url} +refs/heads/*:refs/remotes/origin/*" in logged
    assert f"ls-remote --heads {url}" in logged
    pushed = f"{worktree.head()}:refs/heads/issue-1"
    assert f"push --porcelain --no-verify --no-recurse-submodules {url} {pushed}" in logged
    assert TOKENS["wes"] not in logged


def test_the_repositorys_hooks_never_run_for_the_factorys_git_commands(
    sandbox: Sandbox, clone: ManagedClone, tmp_path: Path, worktrees: Path
) -> None:
    """post-checkout, post-commit and post-merge hooks are code the repository (or the agent)
    controls: thirdshift's own checkouts, commits and merges run none of them."""
    seen = tmp_path / "hook-env.log"
    hooks = (clone.path / "hooks", own_git_dir(worktrees / "issue-1") / "hooks")
    for hook in ("post-checkout", "post-commit", "post-merge"):
        for folder in hooks:
            folder.mkdir(parents=True, exist_ok=True)
            script = folder / hook
            script.write_text(f'#!/bin/sh\necho "{hook}" >> "{seen}"\n')
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("X")
    sandbox.push("main", {"NEWS.md": "news\n"})
    worktree.fetch("main")
    assert worktree.merge("origin/main").status == "merged"
    assert not seen.exists()


def test_code_git_runs_for_the_factory_sees_no_secret_of_its_environment(
    clone: ManagedClone, tmp_path: Path, worktrees: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean filter the agent configured runs during the factory's `git add`; the token (in
    thirdshift's own environment as GITHUB_TOKEN) and other secrets are blanked for it."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKENS["wes"])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-reach-git-children")
    dump = tmp_path / "filter-env.log"
    worktree = clone.add_worktree(worktrees / "issue-2", "issue-2", "origin/main")
    plain_git(worktree.path, "config", "filter.dump.clean", f'env >> "{dump}"; cat')
    write_file(worktree, ".gitattributes", "*.txt filter=dump\n")
    write_file(worktree, "y.txt", "y\n")
    assert worktree.commit_all("Y")
    logged = dump.read_text()
    assert "GITHUB_TOKEN=\n" in logged or "GITHUB_TOKEN=" not in logged
    assert TOKENS["wes"] not in logged
    assert "sk-ant-should-not-reach-git-children" not in logged


def test_configuration_that_could_redirect_the_token_is_removed_before_a_push(
    sandbox: Sandbox, clone: ManagedClone, tmp_path: Path, worktrees: Path
) -> None:
    """An agent sets a pushurl and a url.insteadOf through its Worktree; thirdshift's push
    still goes to origin, and the Worktree's repository's configuration no longer has them."""
    worktree = clone.add_worktree(worktrees / "issue-3", "issue-3", "origin/main")
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True, timeout=60)
    plain_git(worktree.path, "config", "remote.origin.pushurl", str(elsewhere))
    plain_git(worktree.path, "config", f"url.{elsewhere}.insteadOf", clone.remote_url)
    write_file(worktree, "z.txt", "z\n")
    worktree.commit_all("Z")
    worktree.push("issue-3")
    assert clone.has_remote_branch("issue-3")
    config = (own_git_dir(worktree.path) / "config").read_text()
    assert "pushurl" not in config
    assert "insteadOf" not in config


def test_fresh_issue_branch_worktree_starts_at_origin_main_with_no_upstream(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """add_worktree makes the Issue branch at origin/main, with no upstream to push to."""
    worktree = clone.add_worktree(worktrees / "issue-3", "issue-3", "origin/main")
    assert worktree.path == worktrees / "issue-3"
    assert worktree.branch == "issue-3"
    assert worktree.head() == sandbox.main_sha
    assert (worktree.path / "README.md").read_text() == "# widgets\n"
    assert plain_git(worktree.path, "symbolic-ref", "HEAD") == "refs/heads/issue-3"
    upstream = subprocess.run(
        ["git", "config", "--get-regexp", "^branch\\."],
        cwd=worktree.path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert upstream.returncode == 1, upstream.stdout
    assert not worktree.is_dirty()


def test_continuation_worktree_builds_on_the_issue_branch_commits(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """A Continuation from origin/issue-7 has the earlier Run's commits, and pushes on top."""
    earlier = sandbox.push("issue-7", {"feature.txt": "earlier run\n"})
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-7", "issue-7", "origin/issue-7")
    assert worktree.head() == earlier
    assert (worktree.path / "feature.txt").read_text() == "earlier run\n"
    write_file(worktree, "feature.txt", "continued\n")
    assert worktree.commit_all("Continue the feature")
    worktree.push("issue-7")
    assert clone.remote_branches()["issue-7"] == worktree.head()
    assert worktree.is_ancestor(earlier)
    assert worktree.log_subjects("origin/main") == ("Change on issue-7", "Continue the feature")


def test_add_worktree_resets_a_stale_local_branch_and_prunes_stale_registrations(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """A Worktree deleted by hand does not block a new one on the same branch and path."""
    first = clone.add_worktree(worktrees / "issue-4", "issue-4", "origin/main")
    write_file(first, "old.txt", "old\n")
    first.commit_all("Old local commit")
    shutil.rmtree(first.path)
    again = clone.add_worktree(worktrees / "issue-4", "issue-4", "origin/main")
    assert again.head() == sandbox.main_sha


def test_add_worktree_from_a_missing_start_names_the_fix(
    clone: ManagedClone, worktrees: Path
) -> None:
    """A start that does not exist is a GitError that says to sync first."""
    with pytest.raises(GitError) as caught:
        clone.add_worktree(worktrees / "issue-5", "issue-5", "origin/issue-5")
    message = str(caught.value)
    assert "git worktree add" in message
    assert "origin/issue-5" in message
    assert "sync the clone first" in message


def test_detached_worktree_sits_at_start_on_no_branch(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """detached_worktree (for Architect runs) has HEAD at start and no branch."""
    worktree = clone.detached_worktree(worktrees / "architect", "origin/main")
    assert worktree.branch is None
    assert worktree.head() == sandbox.main_sha
    done = subprocess.run(
        ["git", "symbolic-ref", "--quiet", "HEAD"], cwd=worktree.path, check=False, timeout=60
    )
    assert done.returncode != 0


def test_commit_all_commits_everything_as_the_factory_and_is_dirty_sees_it(
    clone: ManagedClone, worktrees: Path
) -> None:
    """Tracked changes and untracked files make a Worktree dirty; commit_all takes them all."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    assert not worktree.is_dirty()
    assert not worktree.commit_all("Nothing")
    write_file(worktree, "app.py", "print('changed')\n")
    assert worktree.is_dirty()
    assert worktree.commit_all("Change app")
    before = worktree.head()
    assert not worktree.is_dirty()
    (worktree.path / "deep" / "er").mkdir(parents=True)
    write_file(worktree, "deep/er/new.txt", "new\n")
    assert worktree.is_dirty()
    assert worktree.commit_all("thirdshift: failed run (interrupted)")
    assert worktree.log_subjects(before) == ("thirdshift: failed run (interrupted)",)
    assert worktree.log_subjects("origin/main") == (
        "Change app",
        "thirdshift: failed run (interrupted)",
    )
    assert worktree.changed_files("origin/main") == ("app.py", "deep/er/new.txt")
    who = plain_git(worktree.path, "log", "-1", "--format=%an <%ae> / %cn <%ce>")
    assert who == (
        "thirdshift factory <factory@thirdshift.invalid> / "
        "thirdshift factory <factory@thirdshift.invalid>"
    )


def test_exclude_hides_a_pattern_once_in_the_worktrees_repository(
    clone: ManagedClone, worktrees: Path
) -> None:
    """An excluded path does not make a Worktree dirty; the pattern is written once, in the
    Worktree's own repository."""
    one = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    one.exclude("/.thirdshift-pr.md")
    one.exclude("/.thirdshift-pr.md")
    write_file(one, ".thirdshift-pr.md", "title\n")
    assert not one.is_dirty()
    assert not one.commit_all("Nothing to see")
    lines = (own_git_dir(one.path) / "info" / "exclude").read_text().splitlines()
    assert lines.count("/.thirdshift-pr.md") == 1


def test_push_lands_and_a_diverged_push_is_rejected_never_forced(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """push lands on origin; after someone else pushes, our diverged push is PushRejected and
    origin keeps their commit."""
    worktree = clone.add_worktree(worktrees / "issue-9", "issue-9", "origin/main")
    write_file(worktree, "ours.txt", "ours\n")
    worktree.commit_all("Ours")
    worktree.push("issue-9")
    assert clone.remote_branches()["issue-9"] == worktree.head()
    worktree.push("issue-9")  # nothing new: still fine

    theirs = sandbox.push("issue-9", {"theirs.txt": "theirs\n"})
    write_file(worktree, "ours.txt", "ours, again\n")
    worktree.commit_all("Ours again")
    with pytest.raises(PushRejected) as caught:
        worktree.push("issue-9")
    message = str(caught.value)
    assert "issue-9" in message
    assert "never force-pushes" in message
    assert TOKENS["wes"] not in message
    assert clone.remote_branches()["issue-9"] == theirs

    worktree.fetch("issue-9")
    assert worktree.remote_sha("issue-9") == theirs
    assert worktree.merge("origin/issue-9").status == "merged"
    worktree.push("issue-9")
    assert clone.remote_branches()["issue-9"] == worktree.head()


def test_fetch_and_remote_sha(sandbox: Sandbox, clone: ManagedClone, worktrees: Path) -> None:
    """remote_sha reads origin/<branch> as of the last fetch; None for an unknown branch."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    assert worktree.remote_sha("main") == sandbox.main_sha
    assert worktree.remote_sha("issue-77") is None
    moved = sandbox.push("main", {"NEWS.md": "news\n"})
    assert worktree.remote_sha("main") == sandbox.main_sha
    worktree.fetch("main")
    assert worktree.remote_sha("main") == moved
    other = sandbox.push("issue-77", {"x.txt": "x\n"})
    worktree.fetch()
    assert worktree.remote_sha("issue-77") == other


def test_merge_of_a_moved_base_branch_makes_a_merge_commit(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """Merging a Base branch that moved on other files makes a merge commit, never a rebase."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "ours.txt", "ours\n")
    worktree.commit_all("Ours")
    ours = worktree.head()
    moved = sandbox.push("main", {"NEWS.md": "news\n"})
    worktree.fetch("main")
    outcome = worktree.merge("origin/main", "Merge main into issue-1")
    assert outcome == MergeOutcome("merged", ())
    parents = plain_git(worktree.path, "log", "-1", "--format=%P").split()
    assert parents == [ours, moved]
    assert worktree.log_subjects(moved) == ("Ours", "Merge main into issue-1")
    assert not worktree.merge_in_progress()


def test_merge_fast_forwards_and_then_is_up_to_date(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """With no local commits a merge fast-forwards; merging again is up-to-date."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    moved = sandbox.push("main", {"NEWS.md": "news\n"})
    worktree.fetch("main")
    assert worktree.merge("origin/main").status == "merged"
    assert worktree.head() == moved
    assert worktree.merge("origin/main") == MergeOutcome("up-to-date", ())
    assert worktree.head() == moved


def test_merge_conflict_is_left_in_progress_and_abort_restores(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """A conflict reports its paths and leaves the merge in progress; abort_merge restores."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "app.py", "print('ours')\n")
    write_file(worktree, "README.md", "# ours\n")
    write_file(worktree, "calm.txt", "calm\n")
    worktree.commit_all("Ours")
    ours = worktree.head()
    sandbox.push("main", {"app.py": "print('theirs')\n", "README.md": "# theirs\n"})
    worktree.fetch("main")
    outcome = worktree.merge("origin/main")
    assert outcome == MergeOutcome("conflict", ("README.md", "app.py"))
    assert worktree.merge_in_progress()
    assert "<<<<<<<" in (worktree.path / "app.py").read_text()
    worktree.abort_merge()
    assert not worktree.merge_in_progress()
    assert worktree.head() == ours
    assert not worktree.is_dirty()
    assert (worktree.path / "app.py").read_text() == "print('ours')\n"
    worktree.abort_merge()  # nothing in progress: nothing to do


def test_a_conflict_resolved_and_committed_finishes_the_merge(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """After a conflict Repair resolves the files, commit_all concludes the merge."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "app.py", "print('ours')\n")
    worktree.commit_all("Ours")
    theirs = sandbox.push("main", {"app.py": "print('theirs')\n"})
    worktree.fetch("main")
    assert worktree.merge("origin/main").status == "conflict"
    write_file(worktree, "app.py", "print('both')\n")
    assert worktree.commit_all("Merge main")
    assert not worktree.merge_in_progress()
    assert worktree.is_ancestor(theirs)


def test_merge_refused_by_local_changes_is_a_git_error(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """Uncommitted changes a merge would overwrite give a GitError naming the fix, no merge."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    sandbox.push("main", {"app.py": "print('theirs')\n"})
    worktree.fetch("main")
    write_file(worktree, "app.py", "print('uncommitted')\n")
    with pytest.raises(GitError) as caught:
        worktree.merge("origin/main")
    assert "git merge" in str(caught.value)
    assert "commit or discard the changes" in str(caught.value)
    assert not worktree.merge_in_progress()


def test_is_ancestor(sandbox: Sandbox, clone: ManagedClone, worktrees: Path) -> None:
    """is_ancestor follows history both ways; an unknown commit is a GitError."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("X")
    assert worktree.is_ancestor(sandbox.main_sha)
    assert worktree.is_ancestor("HEAD")
    assert not worktree.is_ancestor("HEAD", sandbox.main_sha)
    with pytest.raises(GitError):
        worktree.is_ancestor("0" * 40)


def test_remove_worktree_removes_dirty_worktrees_and_tolerates_missing_ones(
    clone: ManagedClone, worktrees: Path
) -> None:
    """remove_worktree deletes a dirty Worktree and its registration; a missing path is fine."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "scratch.txt", "scratch\n")
    clone.remove_worktree(worktree.path)
    assert not worktree.path.exists()
    listed = plain_git(own_git_dir(worktree.path), "worktree", "list", "--porcelain")
    assert f"worktree {worktree.path}" not in listed.splitlines()
    clone.remove_worktree(worktree.path)
    clone.remove_worktree(worktrees / "never-made")
    again = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    assert not again.is_dirty()


def test_a_wrong_token_is_a_git_error_naming_the_remote_and_the_fix(
    sandbox: Sandbox, home: Path
) -> None:
    """A token the remote refuses: GitError naming the command, remote and fix, not the token."""
    wrong = "ghs_wrongtoken0000000000000000000000000"
    clone = make_clone(sandbox, home, token=wrong)
    with pytest.raises(GitError) as caught:
        clone.sync()
    message = str(caught.value)
    assert "git fetch --prune --quiet origin" in message
    assert f"{sandbox.stand_in.web_url}/{FULL_NAME}.git" in message
    assert str(clone.path) in message
    assert "the token (GITHUB_TOKEN) can read acme/widgets" in message
    assert wrong not in message
    with pytest.raises(GitError):
        clone.remote_branches()


def test_a_read_only_token_cannot_push(sandbox: Sandbox, home: Path, worktrees: Path) -> None:
    """A push the token may not make is a GitError (not PushRejected) naming the fix."""
    clone = make_clone(sandbox, home, login="rex")
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("X")
    with pytest.raises(GitError) as caught:
        worktree.push("issue-1")
    assert not isinstance(caught.value, PushRejected)
    assert "push to it" in str(caught.value)
    assert TOKENS["rex"] not in str(caught.value)


def test_two_instances_on_one_path_share_the_clone_and_follow_a_new_url(
    sandbox: Sandbox, home: Path, worktrees: Path
) -> None:
    """A second ManagedClone on the same path reuses the clone, with origin's URL updated."""
    unreachable = ManagedClone(
        home,
        OWNER,
        NAME,
        "http://127.0.0.1:9/acme/widgets.git",
        lambda: TOKENS["wes"],
        FACTORY,
        scrub=Scrubber([TOKENS["wes"]]),
        environ=os.environ,
        timeout=30,
    )
    with pytest.raises(GitError):
        unreachable.sync()
    first = make_clone(sandbox, home)
    first.sync()
    worktree = first.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    worktree.commit_all("X")
    worktree.push("issue-1")
    second = make_clone(sandbox, home)
    assert second.path == first.path
    second.sync()
    url = plain_git(second.path, "config", "--get", "remote.origin.url")
    assert url == f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"
    assert plain_git(second.path, "rev-parse", "refs/remotes/origin/issue-1") == worktree.head()
    second.remove_worktree(worktree.path)
    assert not worktree.path.exists()


def test_an_inherited_git_dir_does_not_redirect_git(
    sandbox: Sandbox, home: Path, tmp_path: Path, worktrees: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GIT_DIR in the caller's environment (a git hook's, say) redirects nothing."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plain_git(elsewhere, "init", "--quiet")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    clone = make_clone(sandbox, home)
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    write_file(worktree, "x.txt", "x\n")
    assert worktree.is_dirty()
    assert worktree.commit_all("X")
    monkeypatch.delenv("GIT_DIR")
    assert not plain_git(elsewhere, "branch", "--list")
    assert plain_git(worktree.path, "log", "-1", "--format=%s") == "X"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/acme/widgets.git"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def test_a_git_command_that_hangs_is_stopped_at_the_timeout(home: Path, silent_server: str) -> None:
    """A remote that never answers: the fetch is killed at the timeout, a GitError says so."""
    clone = ManagedClone(
        home,
        OWNER,
        NAME,
        silent_server,
        lambda: "ghs_unused",
        FACTORY,
        scrub=Scrubber(["ghs_unused"]),
        environ=os.environ,
        timeout=1,
    )
    with pytest.raises(GitError) as caught:
        clone.sync()
    message = str(caught.value)
    assert "git fetch --prune --quiet origin did not finish within 1s" in message
    assert "check that the remote answers, or raise the git timeout" in message
