"""thirdshift's home directory: where each kind of file lives, and the local pre-flight that
checks it before anything on GitHub changes.

A problem here (a home that cannot be made, ``logs`` that is a file, a full disk) is the
machine's, not the issue's: it is reported as one line naming the path and the fix, with exit
1, and nothing is claimed, labelled or posted.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError


class LocalProblem(ThirdshiftError):
    """The home, one of its directories, the database's directory or the disk cannot serve a
    Run. Raised before anything on GitHub changes."""


@dataclass(frozen=True)
class Home:
    """The layout of ``$THIRDSHIFT_HOME``."""

    root: Path

    @property
    def logs(self) -> Path:
        """Session logs."""
        return self.root / "logs"

    @property
    def worktrees(self) -> Path:
        """One Worktree per Run."""
        return self.root / "worktrees"

    def worktree(self, owner: str, name: str, branch: str) -> Path:
        """The Worktree of ``branch`` of ``owner/name`` (an Architect run's: ``architect``, as
        it has no branch of its own)."""
        return self.worktrees / f"{owner}-{name}-{branch}"

    @property
    def repos(self) -> Path:
        """The managed clones."""
        return self.root / "repos"

    @property
    def agent_homes(self) -> Path:
        """The private homes of the agents (their Harness config and transcripts), per Run."""
        return self.root / "agent-homes"

    def agent_home(self, owner: str, name: str, run_id: int) -> Path:
        return self.agent_homes / f"{owner}-{name}-run-{run_id}"


def check_home(home: Home, *, database_dir: Path | None, min_free_mb: int) -> None:
    """Make (if missing) and try every directory a Run writes to; check the disk has at least
    ``min_free_mb`` MiB free. Raises LocalProblem naming the first path at fault."""
    for directory in (home.root, home.logs, home.worktrees, home.repos, home.agent_homes):
        _usable(directory)
    if database_dir is not None:
        _usable(database_dir)
    if (short := disk_short(home.root, min_free_mb)) is not None:
        raise LocalProblem(short)


def disk_short(path: Path, min_free_mb: int) -> str | None:
    """Why the disk holding ``path`` has too little room for a Run (less than ``min_free_mb``
    MiB free), naming the fix; None when it has enough (or ``path`` cannot be measured: what
    then goes wrong says so itself)."""
    try:
        free = shutil.disk_usage(path).free // (1024 * 1024)
    except OSError:
        return None
    if free >= min_free_mb:
        return None
    return (
        f"only {free} MiB free on the disk of {path}; free some space (thirdshift "
        f"needs {min_free_mb} MiB, the setting min_free_disk_mb)"
    )


DISK_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EMFILE, errno.ENFILE}
)
"""The errors that say the machine, not thirdshift, is at fault: no space, over quota, an I/O
error, a read-only file system, no file descriptor left (the process's or the system's)."""


def disk_error(error: BaseException | None) -> OSError | None:
    """The disk error (``DISK_ERRNOS``) behind ``error``: itself, or one it was raised from or
    while handling, however deep; None when there is none."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def disk_problem(error: OSError, doing: str, where: Path | None = None) -> str:
    """The cause a disk or file error gives a Run: the problem (what failed, and the system's
    word for why) and the fix, never "a bug in thirdshift". ``where`` is the directory at
    fault (by default the failed file's own, else thirdshift's home)."""
    reason = error.strerror or os.strerror(error.errno or 0)
    if where is None and error.filename:
        where = Path(os.fsdecode(error.filename)).parent
    place = str(where) if where is not None else "thirdshift's home"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk of {place} is full: {doing} failed ({reason}); free space in {place} "
            "and run again"
        )
    if error.errno == errno.EROFS:
        return (
            f"the disk of {place} is read-only: {doing} failed ({reason}); mount it writable "
            "and run again"
        )
    if error.errno in (errno.EMFILE, errno.ENFILE):
        whose = "thirdshift's process" if error.errno == errno.EMFILE else "the system"
        return (
            f"{whose} has no file descriptor left: {doing} failed ({reason}); raise the limit "
            "(LimitNOFILE= in the daemon's unit, ulimit -n) and run again"
        )
    if error.errno == errno.EIO:
        return (
            f"the disk of {place} failed: {doing} failed ({reason}); check the disk (the "
            "kernel's log says more) and run again"
        )
    return f"{doing} failed ({reason}); check {place} and run again"


def _usable(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise LocalProblem(
            f"{directory} is a file, not a directory; move it away so thirdshift can make the "
            "directory"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".thirdshift-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise LocalProblem(
            f"{directory} cannot be made or written ({reason}); check THIRDSHIFT_HOME and the "
            f"permissions of {_first_existing(directory)}"
        ) from exc


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path("/")
