"""A Failed run on a full disk (adr/0041): whether the Run ended on one, what of the Worktree
can still reach origin, and making room before anything is recorded (a store on that disk
takes nothing until then); and how any salvage step's problem, a full disk's or a defect's,
becomes a warning that never stops the salvage."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from thirdshift.errors import ThirdshiftError
from thirdshift.git import Worktree, own_git_dir, remove_tree
from thirdshift.home import disk_error, disk_problem, disk_short
from thirdshift.store import Store

# Bounds on what the agent left in its repository's refs (_set_aside): the files looked at, the
# bytes of packed-refs read, the names shown and each name's length.
_MOST_ENTRIES = 10_000
_MOST_PACKED_BYTES = 1 << 20
_MOST_NAMES = 20
_NAME_CHARS = 100


def ended_on_one(
    error: BaseException, worktree: Worktree | None, home: Path, min_free_mb: int
) -> bool:
    """Whether the Run ended on a full disk: ``error`` came of one (no space, over quota), or
    the Worktree's disk (else the home's) is below ``min_free_disk_mb`` now."""
    found = disk_error(error)
    if found is not None and found.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    place = worktree.path if worktree is not None else home
    return disk_short(place, min_free_mb) is not None


def commits(
    worktree: Worktree, new_commits: Callable[[Worktree], bool], say: Callable[[str], None]
) -> tuple[str, bool] | None:
    """The Worktree's head, and whether it holds commits to push, when its uncommitted work
    could not be committed on a full disk (that work is given up); None when not even that can
    be read (the Worktree is then kept)."""
    say(
        "the disk is full: the uncommitted work cannot be committed, and goes with the "
        "worktree; its commits are pushed"
    )
    try:
        return worktree.head(), new_commits(worktree)
    except ThirdshiftError:
        return None


def make_room(
    worktree: Worktree | None,
    remove: Callable[[Path], None] | None,
    say: Callable[[str], None],
) -> bool:
    """Remove the Worktree and its repository (``<worktree>.git``): the caller calls this only
    when their commits are on origin or they had none of their own. Kept, they would hold the
    disk full for every later Run (the agent writes both). A later Run on the branch makes
    the repository again, from the managed clone. True when the Worktree is gone."""
    if worktree is None or remove is None:
        return False
    remove(worktree.path)
    if worktree.path.exists():
        return False  # the remover said why
    say(f"removed the worktree {worktree.path} to free the full disk")
    own = own_git_dir(worktree.path)
    if own.is_dir() and not own.is_symlink():
        aside = _set_aside(own)
        # HEAD first: a repository left half removed is then one git init makes whole again.
        with contextlib.suppress(OSError):
            os.chmod(own, 0o700)
            (own / "HEAD").unlink()
        remove_tree(own)
        if not own.exists():
            lost = f"; what an earlier Run set aside there ({aside}) went with it" if aside else ""
            say(f"removed its repository {own} to free the full disk{lost}")
    return True


def remove_agent_home(path: Path, say: Callable[[str], None]) -> None:
    """Remove the Run's agent home on a full disk: an agent that filled it instead of its
    Worktree would otherwise hold the disk full as well."""
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
        if not path.exists():
            say(f"removed the agent home {path} to free the full disk")


def _set_aside(own: Path) -> str:
    """The refs under ``refs/thirdshift/`` of the repository ``own`` (loose or packed), as one
    phrase; empty when none. Read as files: git may not even start on a full disk. The agent
    wrote them all, so nothing is followed or read without a bound, and what is shown is
    printable (``_shown``)."""
    loose, cut = _loose_refs(own)
    packed, truncated = _packed_refs(own)
    return _shown(loose | packed, more=cut or truncated)


def _loose_refs(own: Path) -> tuple[set[str], bool]:
    """The loose refs under ``refs/thirdshift/``, walked with ``lstat`` at each step (a link,
    ``refs`` itself too, leads nowhere), and whether the walk stopped at its bound."""
    names: set[str] = set()
    if not _real_directory(os.path.join(own, "refs")):
        return names, False
    pending = [os.path.join(own, "refs", "thirdshift")]
    seen = 0
    while pending:
        directory = pending.pop()
        if not _real_directory(directory):
            continue
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if seen > _MOST_ENTRIES:
                        return names, True
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        names.add(os.path.relpath(entry.path, own))
        except OSError:
            continue
    return names, False


def _packed_refs(own: Path) -> tuple[set[str], bool]:
    """The refs under ``refs/thirdshift/`` that ``packed-refs`` names, read only from a regular
    file (not through a link: /dev/zero never ends, a FIFO never opens) and at most
    ``_MOST_PACKED_BYTES`` of it; and whether it held more."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        handle = os.open(own / "packed-refs", flags)
    except OSError:
        return set(), False
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return set(), False
        data = b""
        while len(data) <= _MOST_PACKED_BYTES and (chunk := os.read(handle, 1 << 16)):
            data += chunk
    except OSError:
        return set(), False
    finally:
        os.close(handle)
    truncated = len(data) > _MOST_PACKED_BYTES
    if truncated:  # its last line may be cut
        data = data[:_MOST_PACKED_BYTES].rpartition(b"\n")[0]
    names = set()
    for line in data.decode(errors="replace").splitlines():
        name = line.partition(" ")[2]
        if name.startswith("refs/thirdshift/"):
            names.add(name)
    return names, truncated


def _real_directory(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _shown(names: set[str], *, more: bool) -> str:
    """The first ``_MOST_NAMES`` of ``names``, each made printable, on one line, and at most
    ``_NAME_CHARS`` long (they are the agent's, shown on a progress line), then how many more."""
    listed = sorted(names)
    if not listed:
        return "more refs than are read" if more else ""
    phrase = ", ".join(_printable(name) for name in listed[:_MOST_NAMES])
    rest = len(listed) - _MOST_NAMES
    if more:  # a bound cut the reading short: how many more is not known
        return f"{phrase} and at least {rest} more" if rest > 0 else f"{phrase} and more"
    return f"{phrase} and {rest} more" if rest > 0 else phrase


def _printable(name: str) -> str:
    shown = "".join(char if char.isprintable() else "?" for char in name)
    return shown if len(shown) <= _NAME_CHARS else shown[: _NAME_CHARS - 1] + "\u2026"


def end_sessions_left(store: Store, run_id: int, cause: str) -> None:
    """End the Run's sessions whose end could not be recorded (a store on a full disk): no
    session outlives its Run in the record."""
    for session in store.run_sessions(run_id):
        if session.state == "running":
            store.end_session(
                session.id,
                state="failed",
                error=f"its end could not be recorded; the Run failed: {cause}",
            )


_T = TypeVar("_T")


def warned_on_failure(
    what: str, action: Callable[[], _T], say: Callable[[str], None], scrub: Callable[[str], str]
) -> _T | None:
    """``action()``, or None when it fails: reported with ``say`` as a warning, never raised.
    Even an unexpected error (a defect of thirdshift's) is one, with its traceback: the salvage
    goes on, so the Run is still recorded and the issue told, never left ``running``; a disk
    error is named as the disk's problem, not a defect."""
    try:
        return action()
    except ThirdshiftError as problem:
        say(f"warning: {what} failed: {scrub(str(problem))}")
    except Exception as error:  # any defect: see above
        disk = disk_error(error)
        if disk is not None:
            say(f"warning: {scrub(disk_problem(disk, what))}")
            return None
        say(scrub("".join(traceback.format_exception(error)).rstrip()))
        say(
            f"warning: {what} failed: unexpected {error.__class__.__name__}: "
            f"{scrub(str(error))} (a bug in thirdshift; please report it with the lines above)"
        )
    return None
