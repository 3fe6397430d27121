"""Reading ``git log -p`` for the pre-push secret check: every added line, with its file, line
number and commit, and every commit message, read by state so that content never passes for
a header."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class AddedLine:
    """One line a commit adds: ``path`` and ``line`` (1-based, in the commit's version)."""

    commit: str
    path: str
    line: int
    text: str


COMMIT_LINE = "thirdshift-commit "
COMMIT_MESSAGE = "(commit message)"


def added_lines(patch: str) -> Iterator[AddedLine]:
    """The added lines (and message lines) of the ``added_lines`` log, read by state: a
    commit's message, a file's diff header, or a hunk, so content that looks like a header is
    never taken for one."""
    commit, path, state, number, said = "", "", "message", 0, 0
    for raw in _git_lines(patch):
        if raw.startswith(COMMIT_LINE):
            commit, path, state, said = raw.removeprefix(COMMIT_LINE).strip(), "", "message", 0
        elif raw.startswith("diff --git "):
            path, state = "", "header"
        elif state == "message":
            said += 1
            yield AddedLine(commit, COMMIT_MESSAGE, said, raw.removeprefix("    "))
        elif state == "header":
            if raw.startswith("+++ "):
                target = raw.removeprefix("+++ ")
                path = target.removeprefix("b/") if target != "/dev/null" else ""
            elif raw.startswith("@@ "):
                state, number = "hunk", _hunk_start(raw)
        elif raw.startswith("@@ "):
            number = _hunk_start(raw)
        elif raw.startswith("+") and path:
            yield AddedLine(commit, path, number, raw[1:])
            number += 1


def _git_lines(text: str) -> list[str]:
    """``text`` cut at "\n", as git ends its lines, and at a CRLF (a CRLF file's lines end
    there). ``str.splitlines()`` would also cut at a carriage return, a form feed or U+0085
    inside an added line: what follows one would be no added line to the secret check, or a
    hunk header that is none."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines[-1] == "" else lines


def _hunk_start(header: str) -> int:
    """The first line number on the new side of a hunk header ``@@ -a,b +c,d @@`` (1 for one
    it cannot read: the number only places a finding, and the check goes on)."""
    found = _HUNK.match(header)
    return int(found.group(1)) if found else 1


_HUNK = re.compile(r"@@ -[0-9,]+ \+([0-9]+)")


@dataclass(frozen=True)
class ChangedPath:
    """A path one commit adds, changes or removes; a merge's only when it differs from every
    parent (what matches a parent came with that parent's own commits)."""

    commit: str
    path: str


def changed_paths(raw: str) -> Iterator[ChangedPath]:
    """The paths of a ``git log -z --raw --format=%H`` listing, read by state: a path is the
    token right after a ``:``-meta token, whatever it holds, so no path can pass for a commit
    or a meta line (a path may hold any byte but NUL)."""
    commit, path_next = "", False
    for token in raw.split("\0"):
        if path_next:
            yield ChangedPath(commit, token)
            path_next = False
            continue
        token = token.lstrip("\n")
        if token.startswith(":"):
            path_next = True
        elif token:
            commit = token
