"""The pre-push check on real git, against the stand-in's origin: an octopus merge hides no
secret, a commit touching a workflow file is not pushed unless the repository allows it, and
a merge counts only for what it changes against every one of its parents."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract.conftest import Sandbox
from tests.support.clones import plain_git, write_file
from thirdshift.git import ManagedClone, Worktree
from thirdshift.runs.secret_check import SecretInCommits, WorkflowChangesRefused, push_checked
from thirdshift.scrub import Scrubber

TOKEN = "ghp_" + "0ct0pus" * 6  # token-shaped


def _side_branches(worktree: Worktree, *names: str) -> None:
    """Branches off the Worktree's head, each adding a file of its own; then back on it."""
    where, branch = worktree.path, worktree.branch or ""
    for name in names:
        plain_git(where, "checkout", "-q", "-b", name, branch)
        write_file(worktree, f"{name}.txt", f"{name}\n")
        plain_git(where, "add", f"{name}.txt")
        plain_git(where, "commit", "-q", "-m", f"Add {name}")
    plain_git(where, "checkout", "-q", branch)


def _octopus(worktree: Worktree, *parents: str, extra: dict[str, str] | None = None) -> None:
    """An octopus merge of ``parents`` into the Worktree's branch, carrying ``extra`` files
    written before it is committed (as an agent's hand-made merge would)."""
    where = worktree.path
    plain_git(where, "merge", "-q", "--no-ff", "--no-commit", *parents)
    for path, text in (extra or {}).items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(text)
        plain_git(where, "add", path)
    plain_git(where, "commit", "-q", "-m", "Merge the side branches")
    assert len(plain_git(where, "rev-list", "--parents", "-n", "1", "HEAD").split()) >= 4


def _push(worktree: Worktree, branch: str, *, allow_workflow_changes: bool = False) -> None:
    push_checked(
        worktree,
        branch,
        "main",
        Scrubber().findings,
        lambda: None,
        allow_workflow_changes=allow_workflow_changes,
    )


def test_a_secret_an_octopus_merge_adds_is_found_and_nothing_is_pushed(
    clone: ManagedClone, worktrees: Path
) -> None:
    """git has no remerge diff for three or more parents: the check diffs the merge against
    each parent, and the line it added (to a file every parent has) is named by file and
    line."""
    worktree = clone.add_worktree(worktrees / "issue-9", "issue-9", "origin/main")
    write_file(worktree, "app.py", "print('hello')\nprint('ours')\n")
    worktree.commit_all("Ours")
    _side_branches(worktree, "side-a", "side-b", "side-c")
    _octopus(
        worktree,
        "side-a",
        "side-b",
        "side-c",
        extra={"README.md": f"# widgets\nGITHUB_TOKEN={TOKEN}\n"},
    )

    with pytest.raises(SecretInCommits) as caught:
        _push(worktree, "issue-9")

    assert "README.md:2 (" in str(caught.value)
    assert [leak.where for leak in caught.value.leaks] == ["README.md:2"]
    assert TOKEN not in str(caught.value)
    assert not clone.has_remote_branch("issue-9")


def test_a_secret_in_a_new_file_of_an_octopus_merge_is_found(
    clone: ManagedClone, worktrees: Path
) -> None:
    worktree = clone.add_worktree(worktrees / "issue-10", "issue-10", "origin/main")
    _side_branches(worktree, "side-a", "side-b")
    plain_git(worktree.path, "commit", "-q", "--allow-empty", "-m", "Ours")
    _octopus(worktree, "side-a", "side-b", extra={"deploy/keys.env": f"X=1\nK={TOKEN}\n"})

    with pytest.raises(SecretInCommits) as caught:
        _push(worktree, "issue-10")

    assert [leak.where for leak in caught.value.leaks] == ["deploy/keys.env:2"]


def test_an_octopus_merge_is_not_blamed_for_what_a_parent_already_on_origin_holds(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """A token-shaped value on origin's main comes in with main as one parent: the merge
    added nothing itself, so it is pushed."""
    worktree = clone.add_worktree(worktrees / "issue-11", "issue-11", "origin/main")
    sandbox.push("main", {"fixtures.txt": f"sample={TOKEN}\n"})
    worktree.fetch("main")
    _side_branches(worktree, "side-a", "side-b")
    plain_git(worktree.path, "commit", "-q", "--allow-empty", "-m", "Ours")
    _octopus(worktree, "refs/remotes/origin/main", "side-a", "side-b")

    _push(worktree, "issue-11")

    assert clone.remote_branches()["issue-11"] == worktree.head()


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        ".github/actions/setup/action.yml",
        "tools/deploy/action.yaml",
        "nested/Action.YML",
    ],
)
def test_a_commit_adding_a_workflow_file_is_not_pushed(
    clone: ManagedClone, worktrees: Path, path: str
) -> None:
    worktree = clone.add_worktree(worktrees / "issue-12", "issue-12", "origin/main")
    (worktree.path / path).parent.mkdir(parents=True, exist_ok=True)
    write_file(worktree, path, "on: push\n")
    worktree.commit_all("Add CI")

    with pytest.raises(WorkflowChangesRefused) as caught:
        _push(worktree, "issue-12")

    assert caught.value.paths == (path,)
    assert f"change workflow files ({path})" in str(caught.value)
    assert not clone.has_remote_branch("issue-12")


def test_changing_or_removing_a_workflow_file_on_origin_is_refused_too(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    sandbox.push("main", {"action.yml": "runs: {using: node20}\n"})
    clone.sync()
    worktree = clone.add_worktree(worktrees / "issue-13", "issue-13", "origin/main")
    write_file(worktree, "action.yml", "runs: {using: composite}\n")
    worktree.commit_all("Change the action")
    plain_git(worktree.path, "rm", "-q", "action.yml")
    plain_git(worktree.path, "commit", "-q", "-m", "Remove the action")

    with pytest.raises(WorkflowChangesRefused) as caught:
        _push(worktree, "issue-13")

    assert caught.value.paths == ("action.yml",)


def test_a_repository_that_allows_workflow_changes_gets_them_pushed(
    clone: ManagedClone, worktrees: Path
) -> None:
    worktree = clone.add_worktree(worktrees / "issue-14", "issue-14", "origin/main")
    (worktree.path / ".github" / "workflows").mkdir(parents=True)
    write_file(worktree, ".github/workflows/ci.yml", "on: push\n")
    worktree.commit_all("Add CI")

    _push(worktree, "issue-14", allow_workflow_changes=True)

    assert clone.remote_branches()["issue-14"] == worktree.head()


def test_merging_in_the_base_branchs_own_workflow_change_is_pushed(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """A person changed CI on main; the Repair loop's merge of main brings it in unchanged:
    the merge differs from main there, not from every parent, so it is no change of ours."""
    worktree = clone.add_worktree(worktrees / "issue-15", "issue-15", "origin/main")
    write_file(worktree, "app.py", "print('ours')\n")
    worktree.commit_all("Ours")
    sandbox.push("main", {"x.txt": "x\n"})  # makes the person's clone
    (sandbox.workdir / "clone-acme-widgets-main" / ".github" / "workflows").mkdir(parents=True)
    sandbox.push("main", {".github/workflows/ci.yml": "on: push\n"})
    worktree.fetch("main")
    assert worktree.merge("refs/remotes/origin/main").status == "merged"

    _push(worktree, "issue-15")

    assert clone.remote_branches()["issue-15"] == worktree.head()


@pytest.mark.parametrize("parents", [1, 3])
def test_a_merge_that_changes_a_workflow_file_against_every_parent_is_refused(
    clone: ManagedClone, worktrees: Path, parents: int
) -> None:
    """A workflow written in the merge itself (a two-parent merge, or an octopus) is the
    merge's own change."""
    worktree = clone.add_worktree(worktrees / "issue-16", "issue-16", "origin/main")
    sides = [f"side-{k}" for k in range(parents)]
    _side_branches(worktree, *sides)
    plain_git(worktree.path, "commit", "-q", "--allow-empty", "-m", "Ours")
    where = worktree.path
    plain_git(where, "merge", "-q", "--no-ff", "--no-commit", *sides)
    (where / ".github" / "workflows").mkdir(parents=True)
    (where / ".github" / "workflows" / "leak.yml").write_text("on: pull_request\n")
    plain_git(where, "add", ".github")
    plain_git(where, "commit", "-q", "-m", "Merge")

    with pytest.raises(WorkflowChangesRefused) as caught:
        _push(worktree, "issue-16")

    assert caught.value.paths == (".github/workflows/leak.yml",)
