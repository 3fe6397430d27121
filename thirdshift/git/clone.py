"""The managed clone and its Worktrees: every git command thirdshift runs, through GitPython.

thirdshift never touches the user's checkout. For each repository it keeps its own clone under
``$THIRDSHIFT_HOME/repos/<owner>/<name>`` and makes one Worktree per Run from it.

The managed clone is a **bare** repository with an ``origin`` remote whose fetch refspec keeps
remote-tracking branches (``refs/remotes/origin/*``), exactly as a normal clone would. Bare,
because nothing ever works in the clone itself: it has no checkout that could go stale and no
branch "checked out" in it, so any local branch can be made in a Worktree. Its own local
branches are only those of its Worktrees.

How git is run:

- Every command runs through GitPython with an explicit environment and a timeout
  (``kill_after_timeout``); GitPython's exceptions never leave this module: a failure is a
  ``GitError`` naming the command, the clone or Worktree, and the fix.
- git sees no user or system configuration (``GIT_CONFIG_GLOBAL=/dev/null``,
  ``GIT_CONFIG_NOSYSTEM=1``), never prompts (``GIT_TERMINAL_PROMPT=0``), and commits as the
  factory's ``Identity``. The repository's locations are given explicitly (``GIT_DIR``,
  ``GIT_COMMON_DIR``, ``GIT_OBJECT_DIRECTORY`` and, for a Worktree, ``GIT_WORK_TREE`` and
  ``GIT_INDEX_FILE``), so the same variables inherited from the caller (say, from a git hook)
  cannot redirect it. GitPython layers our variables over the caller's environment and cannot
  remove one, so an inherited ``GIT_WORK_TREE`` or ``GIT_INDEX_FILE`` would still reach the
  commands run in the bare clone (``git worktree add`` among them); thirdshift is not meant to
  be started with either.
- **Credentials.** The token never appears in a URL, in argv, in the clone's configuration or in
  a message. Configuration reaches git through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` /
  ``GIT_CONFIG_VALUE_<n>`` environment variables: ``credential.helper`` is first reset, then set
  to a tiny shell helper that answers ``get`` with ``x-access-token`` and ``$TS_GIT_TOKEN``, and
  only when git asks for the configured GitHub's protocol and host (with port). The token itself
  is only in ``TS_GIT_TOKEN``, in the environment of the git processes that talk to the remote
  (``fetch``, ``ls-remote``, ``push``; and so of the helper they start), which name it by its
  explicit URL, never ``origin``, so no ``remote.*`` setting applies. Commands
  that may run the repository's hooks (``worktree add``, ``commit``, ``merge``) get neither the
  helper nor the token. Error text from git is scrubbed of the token all the same.
- Factory commits, merges and pushes run no hooks at all (``core.hooksPath`` is pinned to
  /dev/null and ``--no-verify`` is given): the agent already ran the tests, CI judges the pull
  request, and a hook is code the repository or the agent controls.
- The caller's secrets never reach git's children: every inherited variable whose name says it
  is secret (``GITHUB_TOKEN``, ``*_API_KEY``, ...) or that is a ``THIRDSHIFT_*`` setting is
  blanked in git's environment.
- Before each command that talks to the remote, configuration in the clone that could send the
  token elsewhere or run code (``url.*``, ``remote.*`` but origin's URL and refspec,
  ``credential.*``, ``http.*``, ``protocol.*``, ``include*``, ``core.sshCommand``,
  ``core.gitProxy``, ``core.hooksPath``, ``core.fsmonitor``, ``extensions.worktreeConfig``,
  every ``config.worktree``) is removed. Inside the Agent sandbox the clone's ``config`` is
  read-only; without it, an agent could write it through its Worktree.
- The agent writes the clone's objects and refs, so before every command thirdshift undoes what
  would make its git read elsewhere (alternates, grafts, ``shallow``, linked refs; replace refs
  are ignored), and a Worktree is opened from the admin directory registered for its path,
  never through its ``.git`` file (ADR 0009). The agent of any Run can move any branch of the
  clone, so a Worktree reports each head thirdshift itself moves it to (``on_head``) and the Run
  adopts kept work only at such a head (ADR 0027).
- git runs in a process session of its own, so a second Ctrl-C in the terminal cannot kill the
  push that saves a Failed run's work.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import git as gitpython

from thirdshift.errors import GitError, PushRejected
from thirdshift.git.patches import (
    COMMIT_LINE,
    COMMIT_MESSAGE,
    AddedLine,
    ChangedPath,
    added_lines,
    changed_paths,
)
from thirdshift.git.runner import ALL_BRANCHES, REMOTE, GitRunner, Identity, Result, make_git
from thirdshift.scrub import Scrubber, looks_secret

__all__ = [
    "AddedLine",
    "ChangedPath",
    "Identity",
    "ManagedClone",
    "MergeOutcome",
    "Worktree",
]


@dataclass(frozen=True)
class MergeOutcome:
    """What ``Worktree.merge`` did.

    ``status`` is ``"up-to-date"`` (nothing to merge), ``"merged"`` (a merge commit or a
    fast-forward was made) or ``"conflict"`` (the merge is left in progress; ``conflicted_paths``
    names the unmerged paths).
    """

    status: str
    conflicted_paths: tuple[str, ...] = ()


class ManagedClone:
    """thirdshift's own bare clone of one repository, and the Worktrees made from it.

    ``path`` is ``home / "repos" / owner / name``. Nothing is done on construction; ``sync``
    makes the clone on first use. Two instances on the same path see the same clone.
    """

    def __init__(
        self,
        home: Path,
        owner: str,
        name: str,
        remote_url: str,
        token: Callable[[], str] | None,
        identity: Identity,
        *,
        scrub: Scrubber,
        environ: Mapping[str, str],
        timeout: float = 300.0,
        credential: str = "the token (GITHUB_TOKEN)",
    ) -> None:
        self.path = home / "repos" / owner / name
        self._credential = credential
        self.owner = owner
        self.name = name
        self.remote_url = remote_url
        self._token = token
        self._identity = identity
        self._timeout = timeout
        self._scrub = scrub
        self._environ = environ

    # -- the clone ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Make the clone on first use, point ``origin`` at ``remote_url`` if it changed, and
        fetch every branch of ``origin`` (pruning branches deleted there)."""
        with self.locked():
            git = self._git()
            git.run("fetch", "--prune", "--quiet", REMOTE, ALL_BRANCHES, fix=self._remote_fix())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the clone for one change to what its Worktrees share (fetch, push, adding or
        removing a Worktree): Runs side by side in one repository, in one daemon or in
        several on one home, would otherwise fail on each other's git locks."""
        lock = self.path.parent / f"{self.name}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def remote_branches(self) -> dict[str, str]:
        """Every branch on ``origin`` and its sha, asked of the remote now (``ls-remote``)."""
        result = self._git().run("ls-remote", "--heads", REMOTE, fix=self._remote_fix())
        return _parse_heads(result.stdout)

    def has_remote_branch(self, branch: str) -> bool:
        """Whether ``origin`` has ``branch`` now (``ls-remote``)."""
        result = self._git().run(
            "ls-remote", "--heads", REMOTE, f"refs/heads/{branch}", fix=self._remote_fix()
        )
        return branch in _parse_heads(result.stdout)

    # -- Worktrees ---------------------------------------------------------------------------

    def add_worktree(self, path: Path, branch: str, start: str) -> Worktree:
        """A Worktree at ``path`` on local branch ``branch``, (re)set to ``start`` (for example
        ``origin/main`` for a fresh Issue branch, ``origin/issue-7`` for a Continuation). The
        branch gets no upstream. Stale Worktree registrations are pruned first."""
        with self.locked():
            git = self._git()
            git.run("worktree", "prune")
            path.parent.mkdir(parents=True, exist_ok=True)
            git.run(
                "worktree",
                "add",
                "--quiet",
                "--no-track",
                "-B",
                branch,
                str(path),
                start,
                fix=f"check that {start} exists (sync the clone first) and that no other "
                f"Worktree has {branch} checked out (remove it first)",
            )
        worktree = self._open_worktree(path, branch)
        worktree.known_on_origin = worktree.head()
        return worktree

    def local_head(self, branch: str) -> str | None:
        """The sha of the clone's own local ``branch``, or None when it has none."""
        result = self._git().run(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False
        )
        return result.stdout.strip() if result.status == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant`` (or is it); False when either is
        not a commit the clone holds."""
        args = ("merge-base", "--is-ancestor", ancestor, descendant)
        return self._git().run(*args, check=False).status == 0

    def keep_aside(self, ref: str, sha: str) -> None:
        """Point ``ref`` (outside ``refs/heads``) at ``sha``, so the commit stays for a person
        to look at while the branch itself starts over."""
        with self.locked():
            self._git().run(
                "update-ref", ref, sha, fix=f"check that {sha} is a commit of the clone"
            )

    def kept_worktree(self, path: Path, branch: str) -> Worktree:
        """The Worktree an earlier Run left at ``path`` on ``branch``, to adopt its work."""
        return self._open_worktree(path, branch)

    def detached_worktree(self, path: Path, start: str) -> Worktree:
        """A Worktree at ``path`` with a detached HEAD at ``start`` (for Architect runs)."""
        with self.locked():
            git = self._git()
            git.run("worktree", "prune")
            path.parent.mkdir(parents=True, exist_ok=True)
            git.run(
                "worktree",
                "add",
                "--quiet",
                "--detach",
                str(path),
                start,
                fix=f"check that {start} exists (sync the clone first)",
            )
        return self._open_worktree(path, None)

    def unpushed_work(self, path: Path) -> str | None:
        """What the Worktree at ``path`` holds that is not on ``origin`` (uncommitted changes,
        commits no remote branch has), or None when there is nothing (or no Worktree)."""
        git = self._git()
        if not path.exists() or _resolved(path) not in self._registered_worktrees(git):
            return None
        worktree = self._open_worktree(path, None)
        found: list[str] = []
        if worktree.is_dirty():
            found.append("uncommitted changes")
        ahead = worktree._git.run("rev-list", "--count", "HEAD", "--not", "--remotes=origin")
        count = int(ahead.stdout.strip() or "0")
        if count:
            found.append(f"{count} commit{'s' if count != 1 else ''} not on origin")
        return " and ".join(found) or None

    def remove_worktree(self, path: Path) -> None:
        """Remove the Worktree at ``path`` (uncommitted work in it is lost) and prune its
        registration. A path that is already gone is fine."""
        with self.locked():
            git = self._git()
            if path.exists() and _resolved(path) in self._registered_worktrees(git):
                git.run(
                    "worktree",
                    "remove",
                    "--force",
                    "--force",
                    str(path),
                    fix=f"remove the directory {path} by hand, then run git worktree prune",
                )
            git.run("worktree", "prune")

    # -- inside ------------------------------------------------------------------------------

    def _git(self) -> GitRunner:
        """The clone, made if missing, with ``origin`` pointing at ``remote_url``."""
        broken = (
            f"delete {self.path} (thirdshift's own clone of {self.owner}/{self.name}) and "
            "thirdshift will clone again"
        )
        place = f"the managed clone {self.path}"
        dirs: tuple[Path, Path, Path | None] = (self.path, self.path, None)
        try:
            if not (self.path / "HEAD").is_file():
                self.path.mkdir(parents=True, exist_ok=True)
                init = make_git(gitpython.Git(self.path), place, *self._settings(dirs))
                init.run("init", "--bare", "--quiet", fix=broken)
            repo = gitpython.Repo(self.path)
        except (gitpython.GitError, OSError) as exc:
            raise GitError(
                f"the managed clone {self.path} cannot be opened ({exc}); {broken}"
            ) from exc
        git = make_git(repo.git, place, *self._settings(dirs))
        url = git.run("config", "--get", f"remote.{REMOTE}.url", check=False).stdout.strip()
        if url != self.remote_url:
            if url:
                git.run("config", f"remote.{REMOTE}.url", self.remote_url)
            else:
                git.run("remote", "add", REMOTE, self.remote_url)
        return git

    def _open_worktree(self, path: Path, branch: str | None) -> Worktree:
        # The agent can write the Worktree's .git file and its admin directory's commondir:
        # thirdshift's own git takes neither, but the clone it knows and the admin directory
        # inside it that is registered for this path.
        admin = self._admin_dir(path)
        if admin is None or not path.is_dir():
            raise GitError(
                f"the Worktree {path} is not one the managed clone {self.path} knows; remove "
                "it and run thirdshift again"
            )
        dirs = (admin, self.path, path)
        git = make_git(gitpython.Git(path), f"the Worktree {path}", *self._settings(dirs))
        return Worktree(path, branch, git, self._remote_fix(), self.locked)

    def _admin_dir(self, path: Path) -> Path | None:
        """The directory under the clone's ``worktrees/`` registered for ``path``: a real
        directory (not a link) whose ``gitdir`` names ``path/.git``."""
        wanted = _resolved(path / ".git")
        admins = self.path / "worktrees"
        if not admins.is_dir():
            return None
        for admin in sorted(admins.iterdir()):
            if admin.is_symlink() or not admin.is_dir():
                continue
            gitdir = admin / "gitdir"
            try:
                if gitdir.is_symlink():
                    continue
                named = Path(gitdir.read_text().strip())
            except OSError:
                continue
            if _resolved(named) == wanted:
                return admin
        return None

    def _settings(
        self, dirs: tuple[Path, Path, Path | None]
    ) -> tuple[
        Identity,
        Callable[[], str] | None,
        tuple[Path, Path, Path | None],
        float,
        Scrubber,
        tuple[str, ...],
        str,
    ]:
        # GitPython starts git with thirdshift's whole environment under ours: every secret of
        # the environment the root passed in is emptied for git and the hooks it would run.
        blank = tuple(
            name
            for name in self._environ
            if looks_secret(name) or name.startswith("THIRDSHIFT_") or name == "GH_TOKEN"
        )
        return self._identity, self._token, dirs, self._timeout, self._scrub, blank, self.remote_url

    def _registered_worktrees(self, git: GitRunner) -> set[Path]:
        listing = git.run("worktree", "list", "--porcelain").stdout
        return {
            _resolved(Path(line.removeprefix("worktree ")))
            for line in listing.splitlines()
            if line.startswith("worktree ")
        }

    def _remote_fix(self) -> str:
        return (
            f"check that {self.remote_url} is reachable and that {self._credential} can "
            f"read {self.owner}/{self.name} (and push to it, to push)"
        )


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
        # ever adopted from a kept Worktree (the agents of other Runs can move its branch).
        self.on_head: Callable[[str], None] = lambda _sha: None

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
            self.on_head(self.head())
            return True
        if staged.status != 1:
            raise self._git.error(("diff", "--cached", "--quiet"), staged)
        self._git.run("commit", "--quiet", "--no-verify", "--message", message)
        self.on_head(self.head())
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
        return _parse_heads(
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
            self.on_head(after)
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

    def push(self, branch: str) -> None:
        """``git push origin HEAD:refs/heads/<branch>``, never forced. A refusal by the remote
        (non-fast-forward, or a rule there) raises PushRejected."""
        args = (
            "push",
            "--porcelain",
            "--no-verify",
            "--no-recurse-submodules",
            REMOTE,
            f"HEAD:refs/heads/{branch}",
        )
        with self._locked():
            result = self._git.run(*args, check=False)
        if result.status == 0:
            self.known_on_origin = self.head()
            self.on_head(self.known_on_origin)
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


def _parse_heads(listing: str) -> dict[str, str]:
    heads: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/heads/"):
            heads[ref.removeprefix("refs/heads/")] = sha
    return heads


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))
