"""The pre-push check on real git, against the stand-in's origin: an octopus merge hides no
secret, a known secret encoded (base64, base32, hex, percent-encoded, reversed) is found in an
added line or a commit message, a commit touching a workflow file is not pushed unless the
repository allows it, and a merge counts only for what it changes against every one of its
parents."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.support.clones import plain_git, write_file
from tests.support.stand_in_scenario import FULL_NAME, TOKENS, Sandbox
from thirdshift.errors import GitError, LeaseLost
from thirdshift.git import ManagedClone, Worktree
from thirdshift.runs.secret_check import SecretInCommits, WorkflowChangesRefused, push_checked
from thirdshift.scrub import Scrubber

TOKEN = "ghp_" + "0ct0pus" * 6  # token-shaped
# A known value with no shape of its own: only the scrubber's knowledge of it finds it.
KNOWN = "deploy-hook-secret-4711-of-acme"
ENCODED = {
    "base64": base64.b64encode(KNOWN.encode()).decode(),
    "base64 after one byte": base64.b64encode(b"=" + KNOWN.encode()).decode(),
    "base64 after two bytes": base64.urlsafe_b64encode(b"k=" + KNOWN.encode()).decode(),
    "base32": base64.b32encode(b"key:" + KNOWN.encode()).decode(),
    "hex": KNOWN.encode().hex(),
    "percent-encoded": "".join(f"%{b:02x}" for b in KNOWN.encode()),
    "reversed": KNOWN[::-1],
}


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
    worktree.record_head()  # as a session's end does: what the plain git above made
    push_checked(
        worktree,
        branch,
        "main",
        Scrubber([KNOWN]).findings,
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


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_known_secret_encoded_in_an_added_line_is_found_and_nothing_is_pushed(
    clone: ManagedClone, worktrees: Path, encoding: str
) -> None:
    """Each encoded form of a known value is that value: the push is refused naming the file,
    the line and the encoding, never the value or its encoding."""
    worktree = clone.add_worktree(worktrees / "issue-20", "issue-20", "origin/main")
    write_file(worktree, "hook.txt", f"# the hook\nvalue = {ENCODED[encoding]}\n")
    worktree.commit_all("Add the hook's settings")

    with pytest.raises(SecretInCommits) as caught:
        _push(worktree, "issue-20")

    [leak] = caught.value.leaks
    assert leak.where == "hook.txt:2"
    assert leak.kind == f"known secret value, {encoding.split()[0]}"
    message = str(caught.value)
    assert f"hook.txt:2 (known secret value, {encoding.split()[0]})" in message
    assert KNOWN not in message
    assert ENCODED[encoding] not in message
    assert not clone.has_remote_branch("issue-20")


def test_a_known_secret_encoded_in_a_commit_message_is_found(
    clone: ManagedClone, worktrees: Path
) -> None:
    worktree = clone.add_worktree(worktrees / "issue-21", "issue-21", "origin/main")
    write_file(worktree, "app.py", "print('fine')\n")
    worktree.commit_all(f"Fix the greeting\n\nfor the record: {ENCODED['hex']}")

    with pytest.raises(SecretInCommits) as caught:
        _push(worktree, "issue-21")

    assert [(leak.where, leak.kind) for leak in caught.value.leaks] == [
        ("(commit message):3", "known secret value, hex")
    ]
    assert not clone.has_remote_branch("issue-21")


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_known_secret_base64_wrapped_over_two_lines_is_found_at_the_line_it_starts_on(
    clone: ManagedClone, worktrees: Path, ending: str
) -> None:
    """``base64`` wraps at 76 columns (MIME at 76 with CRLF): an encoding that runs on into the
    next added line is still the secret."""
    # After 55 bytes, the first character only the secret decides is the 75th: the first line
    # ends with two of them (too few to be taken for a cut secret), the next line has the rest.
    encoded = base64.b64encode(b"A" * 55 + KNOWN.encode()).decode()
    wrapped = ending.join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    assert len(wrapped.splitlines()) == 2
    assert Scrubber([KNOWN]).findings(wrapped) == ()
    worktree = clone.add_worktree(worktrees / "issue-22", "issue-22", "origin/main")
    (worktree.path / "blob.b64").write_bytes((wrapped + ending).encode())
    worktree.commit_all("Add a blob")

    with pytest.raises(SecretInCommits) as caught:
        _push(worktree, "issue-22")

    assert [(leak.where, leak.kind) for leak in caught.value.leaks] == [
        ("blob.b64:1", "known secret value, base64")
    ]


def test_base64_data_that_is_no_known_secret_is_pushed(
    clone: ManagedClone, worktrees: Path
) -> None:
    """Test data, digests and the encoding of another value are no secret's form."""
    worktree = clone.add_worktree(worktrees / "issue-23", "issue-23", "origin/main")
    other = b"deploy-hook-secret-4712-of-acme"
    write_file(
        worktree,
        "fixtures.txt",
        f"{base64.b64encode(other).decode()}\n{other.hex()}\n{other.decode()[::-1]}\n",
    )
    worktree.commit_all("Add fixtures")

    _push(worktree, "issue-23")

    assert clone.remote_branches()["issue-23"] == worktree.head()


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


def test_a_head_origin_already_has_is_not_pushed_again_and_a_new_one_is(
    clone: ManagedClone, worktrees: Path, sandbox: Sandbox
) -> None:
    """A Repair round that merged nothing new asks origin for its branches and sends no push
    (here wes may only read by then, so a push would be refused); the next commit is pushed
    as before."""
    worktree = clone.add_worktree(worktrees / "issue-17", "issue-17", "origin/main")
    write_file(worktree, "app.py", "print('first')\n")
    worktree.commit_all("First")
    _push(worktree, "issue-17")
    sandbox.client.add_user("wes", TOKENS["wes"], {FULL_NAME: "read"})

    _push(worktree, "issue-17")

    sandbox.client.add_user("wes", TOKENS["wes"], {FULL_NAME: "write"})
    write_file(worktree, "app.py", "print('second')\n")
    worktree.commit_all("Second")
    _push(worktree, "issue-17")
    assert clone.remote_branches()["issue-17"] == worktree.head()


def test_with_origin_at_the_head_a_lost_lease_or_a_moved_head_still_stops_the_push(
    clone: ManagedClone, worktrees: Path
) -> None:
    """Nothing to send is no way around the fence, nor around the check that HEAD is the head
    thirdshift recorded."""
    worktree = clone.add_worktree(worktrees / "issue-18", "issue-18", "origin/main")
    write_file(worktree, "app.py", "print('first')\n")
    worktree.commit_all("First")
    _push(worktree, "issue-18")
    pushed = worktree.head()

    def lost() -> None:
        raise LeaseLost("the Lease of Run 1 went to Run 2")

    with pytest.raises(LeaseLost):
        push_checked(worktree, "issue-18", "main", Scrubber([KNOWN]).findings, lost)

    write_file(worktree, "app.py", "print('behind thirdshift')\n")
    plain_git(worktree.path, "commit", "-qam", "Not thirdshift's")
    with pytest.raises(GitError, match="something moved it behind thirdshift's back"):
        push_checked(worktree, "issue-18", "main", Scrubber([KNOWN]).findings, lambda: None)
    assert clone.remote_branches()["issue-18"] == pushed
