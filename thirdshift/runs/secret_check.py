"""The pre-push secret check: no commit that adds a secret leaves the machine.

Before every push of a Run (the takeover, each Repair round, the Failed run's salvage) the
lines added by the commits since the Base branch are scanned, commit by commit (a secret added
and removed again is still in history), for the values thirdshift knows are secret, in their
encoded forms too (base64, base32, hex, percent-encoded, reversed: adr/0043), and for token
shapes. A hit stops the push: the Run fails naming the file and line and the kind of
secret, never the value, and the work stays in the kept Worktree for a person to clean.

The same commits may not add, change or remove a workflow file (``.github/workflows/**``,
``.github/actions/**``, an ``action.yml`` anywhere) unless ``allow_workflow_changes`` is on for
the repository: CI runs those with the repository's secrets, on the branch thirdshift pushes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.git import AddedLine, ChangedPath, Worktree, tracking

SHOWN = 5


class _Finding(Protocol):
    """A secret found in a text: its kind and the span of its value (never the value)."""

    @property
    def kind(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


@dataclass(frozen=True)
class Leak:
    """A secret a commit adds: where, and what kind; never its value."""

    path: str
    line: int
    commit: str
    kind: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class SecretInCommits(ThirdshiftError):
    """A commit to be pushed adds a secret; nothing was pushed."""

    def __init__(self, message: str, leaks: Sequence[Leak]) -> None:
        super().__init__(message)
        self.leaks = tuple(leaks)


def leaks_in(
    lines: Iterable[AddedLine], find: Callable[[str], Sequence[_Finding]]
) -> tuple[Leak, ...]:
    """Each added line that holds a secret, once per line and kind, in commit order. A secret
    that runs on from one added line into the next (base64 wrapped at 76 columns, as ``base64``
    writes it) is named at the line it starts on."""
    found: dict[Leak, None] = {}
    previous: AddedLine | None = None
    for added in lines:
        if previous is not None and _next_to(previous, added):
            joined = previous.text + added.text
            wrapped = (f for f in find(joined) if f.start < len(previous.text) < f.end)
            for kind in sorted({finding.kind for finding in wrapped}):
                found[Leak(previous.path, previous.line, previous.commit, kind)] = None
        for kind in sorted({finding.kind for finding in find(added.text)}):
            found[Leak(added.path, added.line, added.commit, kind)] = None
        previous = added
    return tuple(found)


def _next_to(first: AddedLine, second: AddedLine) -> bool:
    """Is ``second`` the line right after ``first`` in the same file of the same commit?"""
    return (first.commit, first.path, first.line + 1) == (second.commit, second.path, second.line)


class WorkflowChangesRefused(ThirdshiftError):
    """A commit to be pushed adds, changes or removes a workflow file and the repository does
    not allow it; nothing was pushed."""

    def __init__(self, message: str, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


WORKFLOW_DIRECTORIES = (".github/workflows", ".github/actions")
ACTION_FILES = ("action.yml", "action.yaml")


def is_workflow_file(path: str) -> bool:
    """Whether CI would run ``path`` as a workflow or an action: under ``.github/workflows`` or
    ``.github/actions`` (the directory itself too, say as a link), or named ``action.yml`` /
    ``action.yaml`` anywhere. Any case: a runner on a case-blind disk reads ``Action.YML``."""
    folded = path.lower()
    under = any(folded == d or folded.startswith(d + "/") for d in WORKFLOW_DIRECTORIES)
    return under or folded.rsplit("/", 1)[-1] in ACTION_FILES


def workflow_changes(changes: Iterable[ChangedPath]) -> tuple[str, ...]:
    """The workflow files the commits touch, each once, in the order first touched."""
    return tuple(dict.fromkeys(c.path for c in changes if is_workflow_file(c.path)))


def describe_workflows(branch: str, paths: Sequence[str], worktree: str) -> str:
    shown = ", ".join(paths[:SHOWN])
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return (
        f"not pushing {branch}: its commits change workflow files ({shown}{more}), which CI "
        f"would run with the repository's secrets; take those changes out of the branch's "
        f"history in {worktree}, or set allow_workflow_changes for this repository, then run "
        "thirdshift again"
    )


class ForeignCommitsConflict(ThirdshiftError):
    """Commits pushed to the Issue branch by someone else conflict with thirdshift's."""


class BranchRewritten(ThirdshiftError):
    """Someone rewrote the Issue branch on origin (a force-push dropped commits this Run started
    from or pushed): thirdshift pushes nothing over their decision."""


SHOWN_COMMITS = 5


def _merge_foreign(
    worktree: Worktree, branch: str, base: str, say: Callable[[str], None]
) -> tuple[str, ...]:
    known = worktree.known_on_origin
    if known is not None and not worktree.is_ancestor(known, tracking(branch)):
        raise BranchRewritten(
            f"{branch} on origin was rewritten: it no longer holds {known[:7]}, which this Run "
            f"started from or pushed; thirdshift pushes nothing over that. Its work is in "
            f"{worktree.path}: look at both, merge what should stay, and push it yourself"
        )
    foreign = worktree.commits_not_here(tracking(branch), besides=tracking(base))
    shown = "; ".join(foreign[:SHOWN_COMMITS])
    if len(foreign) > SHOWN_COMMITS:
        shown += f"; and {len(foreign) - SHOWN_COMMITS} more"
    outcome = worktree.merge(
        tracking(branch), message=f"thirdshift: merge the commits pushed to {branch} meanwhile"
    )
    if outcome.status == "conflict":
        worktree.abort_merge()
        raise ForeignCommitsConflict(
            f"origin/{branch} has commits thirdshift did not make ({shown}) that conflict with "
            f"its own in {', '.join(outcome.conflicted_paths)}; in {worktree.path}, run git "
            f"merge refs/remotes/origin/{branch}, resolve, commit, then git push origin "
            f"HEAD:{branch}, and run thirdshift again"
        )
    say(f"{branch} on origin has commits thirdshift did not make ({shown}); merged them in")
    worktree.foreign_merged.extend(foreign)
    return foreign


def describe(branch: str, leaks: Sequence[Leak], worktree: str) -> str:
    shown = ", ".join(f"{leak.where} ({leak.kind})" for leak in leaks[:SHOWN])
    more = f" and {len(leaks) - SHOWN} more" if len(leaks) > SHOWN else ""
    return (
        f"not pushing {branch}: its commits add what looks like a secret at {shown}{more}; "
        f"remove it from the branch's history in {worktree} (and revoke it if it is real), "
        "then run thirdshift again"
    )


def push_checked(
    worktree: Worktree,
    branch: str,
    base: str,
    find: Callable[[str], Sequence[_Finding]],
    fence: Callable[[], None],
    say: Callable[[str], None] = lambda _line: None,
    *,
    allow_workflow_changes: bool = False,
) -> tuple[str, ...]:
    """Push ``branch`` unless a commit not yet on origin (neither in its ``base`` nor in its
    ``branch``, as origin has them now) adds a secret, or (without ``allow_workflow_changes``)
    touches a workflow file; then raise SecretInCommits or WorkflowChangesRefused and push
    nothing. The remote-tracking refs are fetched again first: the agent can write them. A head
    origin's branch already has is neither checked nor pushed again.

    Commits someone else pushed to ``branch`` meanwhile are merged in first (a merge, never a
    rebase, never a force-push), ``say`` names them, and they are returned; commits that
    conflict with ours raise ForeignCommitsConflict with nothing pushed and the merge undone,
    and a branch rewritten under this Run (a force-push that dropped what it started from or
    pushed) raises BranchRewritten with nothing pushed."""
    remote = worktree.remote_branches()
    if worktree.recorded is not None and remote.get(branch) == worktree.recorded:
        # origin has the recorded head already (a round that merged nothing new): nothing to
        # check, and a push would change nothing. The push still raises if HEAD moved from it.
        fence()
        worktree.push(branch, origin_at=worktree.recorded)
        return ()
    on_origin = [name for name in (base, branch) if name in remote]
    worktree.fetch(*on_origin)
    merged: tuple[str, ...] = ()
    if branch in on_origin and not worktree.is_ancestor(tracking(branch)):
        fence()  # a Run that lost its Lease writes nothing, not even a merge
        merged = _merge_foreign(worktree, branch, base, say)
    pushed = [tracking(name) for name in on_origin]
    leaks = leaks_in(worktree.added_lines(*pushed), find)
    if leaks:
        raise SecretInCommits(describe(branch, leaks, str(worktree.path)), leaks)
    if not allow_workflow_changes:
        workflows = workflow_changes(worktree.changed_paths(*pushed))
        if workflows:
            message = describe_workflows(branch, workflows, str(worktree.path))
            raise WorkflowChangesRefused(message, workflows)
    fence()  # right before the push: a Run that lost its Lease pushes nothing
    worktree.push(branch)
    return merged
