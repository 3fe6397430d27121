"""Removing a tree the agent wrote (a Worktree, its repository, an agent home) whatever
permissions it left there: the agent may take them from directories it made (``chmod 000``),
and then neither git nor ``rmtree`` can empty them, and the tree stays, holding its disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path


def give_back_permissions(top: Path) -> None:
    """Give the owner read, write and search on ``top`` and every directory below it, each
    before it is listed, never following a link (each entry is looked at with ``lstat``; a link
    is left as it is). Called once the sessions that wrote the tree have ended, so nothing swaps
    a directory for a link between the look and the change."""
    pending = [os.fspath(top)]
    while pending:
        directory = pending.pop()
        try:
            mode = os.lstat(directory).st_mode
        except OSError:
            continue
        if not stat.S_ISDIR(mode):
            continue
        if mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):
                os.chmod(directory, stat.S_IMODE(mode) | 0o700)
        try:
            with os.scandir(directory) as entries:
                pending.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue


def remove_tree(path: Path) -> None:
    """Remove the directory ``path`` and all below it, as far as it goes (what stays is seen by
    the caller: ``path`` still exists). A link in it is removed, never followed."""
    give_back_permissions(path)
    shutil.rmtree(path, ignore_errors=True)
