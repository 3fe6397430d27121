"""thirdshift's home directory: where each kind of file lives, and the local pre-flight that
checks it before anything on GitHub changes.

A problem here (a home that cannot be made, ``logs`` that is a file, a full disk) is the
machine's, not the issue's: it is reported as one line naming the path and the fix, with exit
1, and nothing is claimed, labelled or posted.
"""

from __future__ import annotations

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
    free = shutil.disk_usage(home.root).free // (1024 * 1024)
    if free < min_free_mb:
        raise LocalProblem(
            f"only {free} MiB free on the disk of {home.root}; free some space (thirdshift "
            f"needs {min_free_mb} MiB, the setting min_free_disk_mb)"
        )


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
