"""The pre-push secret check: no commit that adds a secret leaves the machine.

Before every push of a Run (the takeover, each Repair round, the Failed run's salvage) the
lines added by the commits since the Base branch are scanned, commit by commit (a secret added
and removed again is still in history), for the values thirdshift knows are secret and for
token shapes. A hit stops the push: the Run fails naming the file and line and the kind of
secret, never the value, and the work stays in the kept Worktree for a person to clean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.git import AddedLine, Worktree, tracking

SHOWN = 5


class _Finding(Protocol):
    @property
    def kind(self) -> str: ...


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
    """Each added line that holds a secret, once per line and kind, in commit order."""
    found: list[Leak] = []
    for added in lines:
        kinds = sorted({finding.kind for finding in find(added.text)})
        found.extend(Leak(added.path, added.line, added.commit, kind) for kind in kinds)
    return tuple(found)


class ForeignCommitsConflict(ThirdshiftError):
    """Commits pushed to the Issue branch by someone else conflict with thirdshift's."""


def _merge_foreign(worktree: Worktree, branch: str, say: Callable[[str], None]) -> None:
    foreign = worktree.commits_not_here(tracking(branch))
    outcome = worktree.merge(
        tracking(branch), message=f"Merge the commits pushed to {branch} meanwhile"
    )
    if outcome.status == "conflict":
        worktree.abort_merge()
        raise ForeignCommitsConflict(
            f"origin/{branch} has commits thirdshift did not make ({'; '.join(foreign)}) that "
            f"conflict with its own in {', '.join(outcome.conflicted_paths)}; merge them by "
            f"hand (git pull in {worktree.path}), push, and run thirdshift again"
        )
    shown = "; ".join(foreign[:5]) + (f"; and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    say(f"{branch} on origin has commits thirdshift did not make ({shown}); merged them in")


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
) -> None:
    """Push ``branch`` unless a commit not yet on origin (neither in its ``base`` nor in its
    ``branch``, as origin has them now) adds a secret; then raise SecretInCommits and push
    nothing. The remote-tracking refs are fetched again first: the agent can write them.

    Commits someone else pushed to ``branch`` meanwhile are merged in first (a merge, never a
    rebase, never a force-push), and ``say`` names them; commits that conflict with ours raise
    ForeignCommitsConflict with nothing pushed and the merge undone."""
    on_origin = [name for name in (base, branch) if name in worktree.remote_branches()]
    worktree.fetch(*on_origin)
    if branch in on_origin and not worktree.is_ancestor(tracking(branch)):
        _merge_foreign(worktree, branch, say)
    leaks = leaks_in(worktree.added_lines(*(tracking(name) for name in on_origin)), find)
    if leaks:
        raise SecretInCommits(describe(branch, leaks, str(worktree.path)), leaks)
    fence()  # right before the push: a Run that lost its Lease pushes nothing
    worktree.push(branch)
