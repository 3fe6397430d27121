"""git: thirdshift's own managed clone of a repository and the Worktrees made from it.

GitPython drives real git; the token reaches only the commands that talk to origin, through a
credential helper in their environment, never argv, a URL or a file.
"""

from thirdshift.git.clone import (
    AddedLine,
    ChangedPath,
    Identity,
    ManagedClone,
)
from thirdshift.git.runner import tracking
from thirdshift.git.worktree import MergeOutcome, Worktree

__all__ = [
    "AddedLine",
    "ChangedPath",
    "Identity",
    "ManagedClone",
    "MergeOutcome",
    "Worktree",
    "tracking",
]
