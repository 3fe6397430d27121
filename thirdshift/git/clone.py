"""The managed clone and its Worktrees: every git command thirdshift runs, through GitPython.

thirdshift never touches the user's checkout. For each repository it keeps its own clone under
``$THIRDSHIFT_HOME/repos/<owner>/<name>`` and makes one Worktree per Run from it, each in a
repository of its own that borrows the clone's objects.

The managed clone is a **bare** repository with an ``origin`` remote whose fetch refspec keeps
remote-tracking branches (``refs/remotes/origin/*``), exactly as a normal clone would. Bare,
because nothing ever works in the clone itself: it has no checkout that could go stale and no
branch "checked out" in it. Its local branches live in its Worktrees' own repositories.
``ManagedClone`` is here, ``Worktree`` in ``worktree``.

How git is run:

- Every command runs through GitPython with an explicit environment and a timeout
  (``kill_after_timeout``); GitPython's exceptions never leave this module: a failure is a
  ``GitError`` naming the command, the clone or Worktree, and the fix.
- git sees no user or system configuration (``GIT_CONFIG_GLOBAL=/dev/null``,
  ``GIT_CONFIG_NOSYSTEM=1``), never prompts (``GIT_TERMINAL_PROMPT=0``), and commits as the
  factory's ``CommitIdentity``. The repository's locations are given explicitly (``GIT_DIR``,
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
- **Each Worktree has a repository of its own** (adr/0042): a bare repository beside it
  (``<worktree>.git``, ``own_git_dir``) that borrows the managed clone's objects through an
  alternate and holds its own refs (its branch, and the remote-tracking branches copied from the
  clone when the Worktree is made). The agent writes only that repository (a commit needs its
  objects and refs); the managed clone is read-only to every session, so no agent can move
  another Run's branch. The agent can still write its own repository, so before every command
  thirdshift undoes what would make its git read elsewhere (grafts, ``shallow``, linked refs;
  the one alternate is written back; replace refs are ignored), a Worktree is opened from the
  admin directory registered for its path, never through its ``.git`` file (ADR 0009), and a
  Worktree pushes only the head thirdshift last recorded for it (``Worktree.recorded``,
  adr/0027), by its sha.
- git runs in a process session of its own, so a second Ctrl-C in the terminal cannot kill the
  push that saves a Failed run's work.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import git as gitpython

from thirdshift.errors import GitError
from thirdshift.git.patches import AddedLine, ChangedPath
from thirdshift.git.runner import ALL_BRANCHES, REMOTE, CommitIdentity, GitRunner, make_git
from thirdshift.git.trees import give_back_permissions, remove_tree
from thirdshift.git.worktree import Worktree, parse_heads
from thirdshift.scrub import Scrubber, looks_secret

__all__ = [
    "AddedLine",
    "ChangedPath",
    "CommitIdentity",
    "ManagedClone",
    "own_git_dir",
]

_REMOTE_TRACKING = f"+refs/remotes/{REMOTE}/*:refs/remotes/{REMOTE}/*"
_GIT_WORKTREE_ADMINS = "worktrees/"
"""git's own administrative directory in a repository, ``$GIT_DIR/worktrees/``: one directory
per linked worktree, with its ``gitdir`` file. git's layout, not where thirdshift puts its
Worktrees (that is ``Home.worktree``). Read from the files, not asked of git: git would follow a
``commondir`` the agent can write."""


def own_git_dir(worktree: Path) -> Path:
    """The repository of the Worktree at ``worktree``: beside it, ``<worktree>.git``. Kept when
    the Worktree is removed (what a Run set aside stays there, and a later Run on the branch
    makes its Worktree there again)."""
    return worktree.with_name(f"{worktree.name}.git")


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
        identity: CommitIdentity,
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

    def sync(self) -> dict[str, str]:
        """Make the clone on first use, point ``origin`` at ``remote_url`` if it changed, and
        fetch every branch of ``origin`` (pruning branches deleted there); return each branch
        and its sha as the fetch found them. Read from the clone's own remote-tracking refs,
        which no agent can reach: asking origin again (``ls-remote``) right after the fetch was
        one more round trip to GitHub for the same answer."""
        with self.locked():
            git = self._git()
            git.run("fetch", "--prune", "--quiet", REMOTE, ALL_BRANCHES, fix=self._remote_fix())
            tracked = f"refs/remotes/{REMOTE}/"
            listed = git.run("for-each-ref", "--format=%(objectname)%09%(refname)", tracked)
        branches = parse_heads(listed.stdout, under=tracked)
        branches.pop("HEAD", None)  # a symbolic origin/HEAD, no branch (git names none HEAD)
        return branches

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
        return parse_heads(result.stdout)

    def has_remote_branch(self, branch: str) -> bool:
        """Whether ``origin`` has ``branch`` now (``ls-remote``)."""
        result = self._git().run(
            "ls-remote", "--heads", REMOTE, f"refs/heads/{branch}", fix=self._remote_fix()
        )
        return branch in parse_heads(result.stdout)

    # -- Worktrees ---------------------------------------------------------------------------

    def add_worktree(self, path: Path, branch: str, start: str) -> Worktree:
        """A Worktree at ``path`` on local branch ``branch``, (re)set to ``start`` (for example
        ``origin/main`` for a fresh Issue branch, ``origin/issue-7`` for a Continuation). The
        branch gets no upstream. Stale Worktree registrations are pruned first."""
        with self.locked():
            git = self._own_repository(path)
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
        worktree.recorded = worktree.known_on_origin
        return worktree

    def local_head(self, path: Path, branch: str) -> str | None:
        """The sha of ``branch`` in the repository of the Worktree at ``path``, or None when it
        has none (or there is no such repository)."""
        git = self._existing_repository(path)
        if git is None:
            return None
        result = git.run(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False
        )
        return result.stdout.strip() if result.status == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str, *, path: Path | None = None) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant`` (or is it), in the clone or, with
        ``path``, in the repository of the Worktree there; False when either is not a commit it
        holds."""
        git = self._git() if path is None else self._existing_repository(path)
        if git is None:
            return False
        args = ("merge-base", "--is-ancestor", ancestor, descendant)
        return git.run(*args, check=False).status == 0

    def keep_aside(self, path: Path, ref: str, sha: str) -> None:
        """Point ``ref`` (outside ``refs/heads``) at ``sha`` in the repository of the Worktree
        at ``path`` (which holds its objects), so the commit stays for a person to look at
        while the branch itself starts over."""
        with self.locked():
            self._own_repository(path).run(
                "update-ref",
                ref,
                sha,
                fix=f"check that {sha} is a commit of the repository {own_git_dir(path)}",
            )

    def kept_worktree(self, path: Path, branch: str) -> Worktree:
        """The Worktree an earlier Run left at ``path`` on ``branch``, to adopt its work."""
        return self._open_worktree(path, branch)

    def detached_worktree(self, path: Path, start: str) -> Worktree:
        """A Worktree at ``path`` with a detached HEAD at ``start`` (for Architect runs)."""
        with self.locked():
            git = self._own_repository(path)
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
        worktree = self._open_worktree(path, None)
        worktree.recorded = worktree.head()
        return worktree

    def unpushed_work(self, path: Path) -> str | None:
        """What the Worktree at ``path`` holds that is not on ``origin`` (uncommitted changes,
        commits no remote branch has), or None when there is nothing (or no Worktree)."""
        git = self._existing_repository(path)
        if git is None or not path.exists():
            return None
        if _resolved(path) not in self._registered_worktrees(git):
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
        registration. A path that is already gone is fine. A Worktree made before adr/0042
        (registered in the clone itself) is removed the same way; its branch stays in the
        clone. A directory the agent took the permissions from goes too: they are given back
        first, and should git still fail, thirdshift removes the tree itself."""
        with self.locked():
            own = self._existing_repository(path)
            for git in (self._git(), *([own] if own is not None else [])):
                if path.exists() and _resolved(path) in self._registered_worktrees(git):
                    _remove_registered(git, path)
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

    def _own_repository(self, path: Path) -> GitRunner:
        """The repository of the Worktree at ``path``, made on first use, with the clone's
        remote-tracking branches copied in (as the clone has them now: its Worktree starts from
        one of them). Called with the clone locked."""
        own = own_git_dir(path)
        place = f"the repository {own} of the Worktree {path}"
        dirs: tuple[Path, Path, Path | None] = (own, own, None)
        try:
            if not (own / "HEAD").is_file():
                own.mkdir(parents=True, exist_ok=True)
                self._runner_for(own, place, dirs).run(
                    "init", "--bare", "--quiet", fix=f"delete {own} and run thirdshift again"
                )
        except OSError as exc:
            raise GitError(
                f"the repository {own} of the Worktree {path} cannot be made ({exc}); check "
                f"that {own.parent} can be written"
            ) from exc
        git = self._runner_for(own, place, dirs)
        git.run(
            "fetch",
            "--prune",
            "--quiet",
            "--no-tags",
            str(self.path),
            _REMOTE_TRACKING,
            fix=f"sync the managed clone {self.path} first",
        )
        return git

    def _existing_repository(self, path: Path) -> GitRunner | None:
        """The repository of the Worktree at ``path`` when it exists, as it is; else None."""
        own = own_git_dir(path)
        if own.is_symlink() or not (own / "HEAD").is_file():
            return None
        place = f"the repository {own} of the Worktree {path}"
        return self._runner_for(own, place, (own, own, None))

    def _runner_for(
        self, work_dir: Path, place: str, dirs: tuple[Path, Path, Path | None]
    ) -> GitRunner:
        """A runner for a Worktree or its repository, borrowing the clone's objects."""
        runner = gitpython.Git(work_dir)
        return make_git(runner, place, *self._settings(dirs), alternates=self.path / "objects")

    def _open_worktree(self, path: Path, branch: str | None) -> Worktree:
        # The agent can write the Worktree's .git file and its admin directory's commondir:
        # thirdshift's own git takes neither, but the repository it made for this path and
        # the admin directory inside it that is registered for the path.
        own = own_git_dir(path)
        admin = self._admin_dir(own, path)
        if admin is None or not path.is_dir():
            raise GitError(
                f"the Worktree {path} is not one thirdshift made from the managed clone "
                f"{self.path}; remove it and run thirdshift again"
            )
        git = self._runner_for(path, f"the Worktree {path}", (admin, own, path))
        return Worktree(path, branch, git, self._remote_fix(), self.locked)

    def _admin_dir(self, own: Path, path: Path) -> Path | None:
        """The directory under ``own``'s ``_GIT_WORKTREE_ADMINS`` registered for ``path``: a real
        directory (not a link) whose ``gitdir`` names ``path/.git``."""
        wanted = _resolved(path / ".git")
        if own.is_symlink():
            return None
        admins = own / _GIT_WORKTREE_ADMINS
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
        CommitIdentity,
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


def _remove_registered(git: GitRunner, path: Path) -> None:
    """Remove the Worktree at ``path``, registered in ``git``'s repository (its registration is
    pruned after). Without its permissions back, one ``chmod 000`` directory of the agent's
    would keep the Worktree, and on a full disk the disk full (adr/0041)."""
    give_back_permissions(path)
    args = ("worktree", "remove", "--force", "--force", str(path))
    result = git.run(*args, check=False)
    if result.status == 0:
        return
    remove_tree(path)
    if os.path.lexists(path):
        raise git.error(
            args, result, f"remove the directory {path} by hand, then run git worktree prune"
        )


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))
