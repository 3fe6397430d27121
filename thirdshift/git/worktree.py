"""One Worktree of a managed clone: what a Run does in it with git (commit, fetch, merge,
push, and the reads of the pre-push check). How git is run, and why, is ``clone``'s docstring.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import GitError, PushRejected
from thirdshift.git.patches import (
    COMMIT_LINE,
    COMMIT_MESSAGE,
    AddedLine,
    ChangedPath,
    added_lines,
    changed_paths,
)
from thirdshift.git.runner import ALL_BRANCHES, REMOTE, GitRunner, Result


@dataclass(frozen=True)
class MergeOutcome:
    """What ``Worktree.merge`` did.

    ``status`` is ``"up-to-date"`` (nothing to merge), ``"merged"`` (a merge commit or a
    fast-forward was made) or ``"conflict"`` (the merge is left in progress; ``conflicted_paths``
    names the unmerged paths).
    """

    status: str
    conflicted_paths: tuple[str, ...] = ()


class Worktree:
    """One Worktree of a managed clone, on ``branch`` (``None`` when HEAD is detached)."""

    def __init__(
        self,
        path: Path,
        branch: str | None,
        git: GitRunner,
        remote_fix: str,
        locked: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.path = path
        self.branch = branch
        self._git = git
        self._remote_fix = remote_fix
        self._locked = locked
        # What this Run knows origin held: where it started, then what it pushed. Kept here,
        # never read back from refs/remotes (the agent can write those).
        self.known_on_origin: str | None = None
        # Commits others pushed that this Run merged in (named, for a Merge run to hold).
        self.foreign_merged: list[str] = []
        # Told the new head each time thirdshift itself moves the branch (a commit, a merge, a
        # push) and by ``record_head``: the Run records it, and only a head recorded so is
        # ever adopted from a kept Worktree (adr/0027).
        self.on_head: Callable[[str], None] = lambda _sha: None
        # The last head thirdshift recorded here (where it made the Worktree, then each head
        # told to on_head): the only commit ``push`` sends (adr/0042).
        self.recorded: str | None = None

    def __repr__(self) -> str:
        return f"Worktree({str(self.path)!r}, branch={self.branch!r})"

    def head(self) -> str:
        """The full sha of HEAD."""
        return self._git.run("rev-parse", "--verify", "HEAD").stdout.strip()

    def record_head(self) -> None:
        """Tell ``on_head`` where HEAD is now (a session just ended); a HEAD git cannot read
        is not told, and raises nothing: this runs while a failure is on its way out."""
        try:
            head = self.head()
        except GitError:
            return
        self._moved(head)

    def adopt(self, head: str) -> None:
        """Stand behind ``head``, the head a caller checked in a Worktree an earlier Run kept,
        as if thirdshift had recorded it; GitError when HEAD is not there (any more)."""
        now = self.head()
        if now != head:
            raise GitError(
                f"the Worktree {self.path} moved from {head[:12]} to {now[:12]} while thirdshift "
                "looked at it; stop whatever works in it, then run thirdshift again"
            )
        self._moved(head)

    def _moved(self, head: str) -> None:
        self.recorded = head
        self.on_head(head)

    def is_dirty(self) -> bool:
        """Whether there are changes to tracked files or untracked files git does not ignore."""
        status = self._git.run(
            "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all"
        ).stdout
        return bool(status.strip())

    def commit_all(self, message: str, *, allow_empty: bool = False) -> bool:
        """Stage everything (``git add -A``) and commit it as the factory's identity; False, and
        no commit, when there is nothing to commit (unless ``allow_empty``: a Failed run marks
        the branch even when no work was left uncommitted)."""
        self._git.run("add", "--all")
        staged = self._git.run("diff", "--cached", "--quiet", check=False)
        if staged.status == 0:
            if not allow_empty:
                return False
            self._git.run("commit", "--quiet", "--no-verify", "--allow-empty", "--message", message)
            self._moved(self.head())
            return True
        if staged.status != 1:
            raise self._git.error(("diff", "--cached", "--quiet"), staged)
        self._git.run("commit", "--quiet", "--no-verify", "--message", message)
        self._moved(self.head())
        return True

    def fetch(self, *refs: str) -> None:
        """Fetch ``origin``: the given branches only, or every branch (pruning) when none."""
        with self._locked():
            self._fetch(*refs)

    def _fetch(self, *refs: str) -> None:
        if refs:
            specs = [f"+refs/heads/{ref}:refs/remotes/{REMOTE}/{ref}" for ref in refs]
            self._git.run(
                "fetch", "--quiet", "--no-recurse-submodules", REMOTE, *specs, fix=self._remote_fix
            )
        else:
            self._git.run(
                "fetch",
                "--prune",
                "--quiet",
                "--no-recurse-submodules",
                REMOTE,
                ALL_BRANCHES,
                fix=self._remote_fix,
            )

    def read_agent_file(self, name: str, limit: int = 64 * 1024) -> str | None:
        """The text of the file ``name`` the agent left at the Worktree's root (at most
        ``limit`` bytes), or None when there is none. Only a regular file: never through a
        link, which could make thirdshift publish any file it can read."""
        try:
            descriptor = os.open(self.path / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(limit).decode("utf-8", "replace")

    def remote_branches(self) -> dict[str, str]:
        """Every branch on ``origin`` and its sha, asked of the remote now (``ls-remote``)."""
        return parse_heads(
            self._git.run("ls-remote", "--heads", REMOTE, fix=self._remote_fix).stdout
        )

    def remote_sha(self, branch: str) -> str | None:
        """The sha of ``origin/<branch>`` as of the last fetch, or None when there is none."""
        result = self._git.run(
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/remotes/{REMOTE}/{branch}^{{commit}}",
            check=False,
        )
        return result.stdout.strip() if result.status == 0 else None

    def merge(self, ref: str, message: str | None = None) -> MergeOutcome:
        """``git merge --no-edit <ref>``: a merge (or fast-forward), never a rebase. On a
        conflict the merge is left in progress for a conflict Repair and the paths reported."""
        before = self.head()
        args = ["merge", "--no-edit", "--no-verify", "--quiet"]
        if message is not None:
            args += ["--message", message]
        result = self._git.run(*args, ref, check=False)
        if result.status == 0:
            after = self.head()
            if after == before:
                return MergeOutcome("up-to-date")
            self._moved(after)
            return MergeOutcome("merged")
        if self.merge_in_progress():
            return MergeOutcome("conflict", self._unmerged_paths())
        raise self._git.error(
            [*args, ref],
            result,
            f"commit or discard the changes in the Worktree before merging {ref}",
        )

    def merge_in_progress(self) -> bool:
        """Whether a merge is under way (MERGE_HEAD exists)."""
        result = self._git.run("rev-parse", "--verify", "--quiet", "MERGE_HEAD", check=False)
        return result.status == 0

    def abort_merge(self) -> None:
        """Abort the merge in progress, restoring the state before it; nothing when none."""
        if self.merge_in_progress():
            self._git.run("merge", "--abort")

    def is_ancestor(self, ancestor: str, descendant: str = "HEAD") -> bool:
        """Whether ``ancestor`` is reachable from ``descendant`` (or is it)."""
        args = ("merge-base", "--is-ancestor", ancestor, descendant)
        result = self._git.run(*args, check=False)
        if result.status in (0, 1):
            return result.status == 0
        raise self._git.error(args, result, "fetch first if a commit is missing")

    def push(self, branch: str, *, origin_at: str | None = None) -> None:
        """``git push origin <recorded>:refs/heads/<branch>``, never forced: exactly the head
        thirdshift last recorded here, and only while HEAD is still there (GitError naming both
        otherwise: something moved the branch behind thirdshift's back). A refusal by the
        remote (non-fast-forward, or a rule there) raises PushRejected. ``origin_at``: the
        sha origin's branch has now, when the caller just asked; at the head, nothing is sent."""
        head = self.head()
        if head != self.recorded:
            recorded = self.recorded[:12] if self.recorded else "none"
            raise GitError(
                f"not pushing {branch}: the Worktree {self.path} is at {head[:12]}, not at the "
                f"head thirdshift recorded for it ({recorded}); something moved it behind "
                "thirdshift's back: look at that commit, then run thirdshift again"
            )
        if origin_at == head:
            self.known_on_origin = head
            self._moved(head)
            return
        args = (
            "push",
            "--porcelain",
            "--no-verify",
            "--no-recurse-submodules",
            REMOTE,
            f"{head}:refs/heads/{branch}",
        )
        with self._locked():
            result = self._git.run(*args, check=False)
        if result.status == 0:
            self.known_on_origin = head
            self._moved(head)
            return
        refused = [line for line in result.stdout.splitlines() if line.startswith("!")]
        if refused:
            reason = refused[0].split("\t")[-1]
            raise PushRejected(
                self._git.describe(
                    args,
                    Result(result.status, "", f"origin refused {branch}: {reason}"),
                    f"fetch origin/{branch} and merge it in (thirdshift never force-pushes)",
                )
            )
        raise self._git.error(args, result, self._remote_fix)

    def exclude(self, pattern: str) -> None:
        """Add ``pattern`` to the clone's shared ``info/exclude``, unless it is there already."""
        common = self._git.run("rev-parse", "--path-format=absolute", "--git-common-dir")
        exclude = Path(common.stdout.strip()) / "info" / "exclude"
        try:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            text = exclude.read_text() if exclude.exists() else ""
            if pattern in text.splitlines():
                return
            if text and not text.endswith("\n"):
                text += "\n"
            exclude.write_text(f"{text}{pattern}\n")
        except OSError as exc:
            raise GitError(
                f"cannot add {pattern!r} to {exclude} ({exc}); check that file's permissions"
            ) from exc

    def changed_files(self, since: str) -> tuple[str, ...]:
        """Paths that differ between ``since`` and HEAD (committed changes only)."""
        result = self._git.run("diff", "--name-only", "-z", since, "HEAD")
        return tuple(path for path in result.stdout.split("\0") if path)

    def commits_not_here(self, ref: str, *, besides: str | None = None) -> tuple[str, ...]:
        """The commits of ``ref`` that HEAD lacks (and ``besides`` too, when given), oldest
        first, each as ``<short sha> <subject> (<author>)``."""
        args = ["log", "--reverse", "--format=%h %s (%an)", f"HEAD..{ref}"]
        if besides is not None:
            args += ["--not", besides]
        return tuple(self._git.run(*args).stdout.splitlines())

    def log_subjects(self, since: str) -> tuple[str, ...]:
        """The subjects of the commits in HEAD that are not in ``since``, oldest first."""
        result = self._git.run("log", "--reverse", "--format=%s", f"{since}..HEAD")
        return tuple(result.stdout.splitlines())

    def log_messages(self, since: str) -> tuple[str, ...]:
        """The whole messages of the commits in HEAD that are not in ``since``, oldest first."""
        result = self._git.run("log", "--reverse", "--format=%B%x00", f"{since}..HEAD")
        return tuple(m.strip() for m in result.stdout.split("\0") if m.strip())

    def added_lines(self, *since: str) -> tuple[AddedLine, ...]:
        """Every line added by the commits in HEAD that are in none of ``since``, with its file,
        its line number in that commit and its commit, oldest commit first; and each commit's
        message, as lines of the path ``COMMIT_MESSAGE``. Every file counts as text (a
        ``-diff`` attribute or a NUL byte hides nothing), and a merge shows what it added
        beyond the automatic merge (its conflict resolutions); an octopus merge (three or more
        parents, for which git has no remerge diff) the lines it adds against every one of its
        parents. What a later commit removed again is still listed: history keeps it, and a
        push would publish it."""
        result = self._git.run(
            "log",
            "--reverse",
            "--no-color",
            *_PATCH_OPTIONS,
            "--remerge-diff",
            # Whatever the repository's own config says (log.showRoot, i18n.logOutputEncoding).
            "--root",
            "--encoding=UTF-8",
            f"--format={COMMIT_LINE}%H%n%w(0,4,4)%B",
            "-p",
            "HEAD",
            "--not",
            *since,
            "--",
        )
        found = list(added_lines(result.stdout))
        octopus = self._git.run("rev-list", "--min-parents=3", "HEAD", "--not", *since, "--")
        for commit in octopus.stdout.split():
            found.extend(self._octopus_lines(commit))
        return tuple(found)

    def _octopus_lines(self, commit: str) -> list[AddedLine]:
        """The lines an octopus merge adds against each of its parents, kept when added against
        all of them: a line one parent holds came with that parent, whose own commits the
        check scans (or origin already has). Its message is in the log already."""
        parents = self._git.run("rev-list", "--parents", "-n", "1", commit).stdout.split()[1:]
        per_parent: list[list[AddedLine]] = []
        for parent in parents:
            diff = self._git.run("diff", *_PATCH_OPTIONS, parent, commit, "--")
            lines = added_lines(f"{COMMIT_LINE}{commit}\n{diff.stdout}")
            per_parent.append([line for line in lines if line.path != COMMIT_MESSAGE])
        if not per_parent:
            return []
        everywhere = set.intersection(*({(a.path, a.line) for a in lines} for lines in per_parent))
        return [line for line in per_parent[0] if (line.path, line.line) in everywhere]

    def changed_paths(self, *since: str) -> tuple[ChangedPath, ...]:
        """Every path a commit in HEAD that is in none of ``since`` adds, changes or removes,
        oldest commit first; a merge's (of any number of parents) only where it differs from
        every parent."""
        result = self._git.run(
            "log",
            "--reverse",
            "--no-color",
            "--no-renames",
            "--root",
            "-c",
            "--raw",
            "-z",
            "--format=%H",
            "HEAD",
            "--not",
            *since,
            "--",
        )
        return tuple(changed_paths(result.stdout))

    def _unmerged_paths(self) -> tuple[str, ...]:
        result = self._git.run("diff", "--name-only", "-z", "--diff-filter=U")
        return tuple(sorted({path for path in result.stdout.split("\0") if path}))


_PATCH_OPTIONS = ("--no-ext-diff", "--no-textconv", "--text", "--unified=0")
"""How a patch is shown to the secret check: every file as text, as stored, each line once."""


def parse_heads(listing: str, under: str = "refs/heads/") -> dict[str, str]:
    """``{branch: sha}`` of the lines of an ``ls-remote`` listing (or a ``for-each-ref`` one in
    its format) whose ref is under ``under``."""
    heads: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith(under):
            heads[ref.removeprefix(under)] = sha
    return heads
