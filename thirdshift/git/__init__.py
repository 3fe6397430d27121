"""git: thirdshift's own managed clone of a repository and the Worktrees made from it.

GitPython drives real git; the token reaches only the commands that talk to origin, through a
credential helper in their environment, never argv, a URL or a file.
"""

from thirdshift.git.clone import (
    AddedLine,
    ChangedPath,
    CommitIdentity,
    ManagedClone,
    own_git_dir,
)
from thirdshift.git.runner import tracking
from thirdshift.git.trees import remove_tree
from thirdshift.git.worktree import MergeOutcome, Worktree

__all__ = [
    "AddedLine",
    "ChangedPath",
    "CommitIdentity",
    "ManagedClone",
    "MergeOutcome",
    "Worktree",
    "own_git_dir",
    "remove_tree",
    "tracking",
]
