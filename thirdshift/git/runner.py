"""How one git command is run for the managed clone or a Worktree: the environment, the
credential helper for the commands that talk to ``origin`` and nothing else, the clean-up of
configuration that could redirect the token, timeouts, and errors that name the command and
the fix. The rules are described in ``thirdshift.git.clone``'s docstring; this module is their
mechanism.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import git as gitpython

from thirdshift.errors import GitError
from thirdshift.scrub import Scrubber

TOKEN_VARIABLE = "TS_GIT_TOKEN"  # noqa: S105 (a variable name, not a secret)
"""The environment variable, set only for git subprocesses, that the credential helper reads."""
HOST_VARIABLE = "TS_GIT_HOST"
PROTOCOL_VARIABLE = "TS_GIT_PROTOCOL"
"""The one host (with its port) and protocol the credential helper answers for."""

# git asks the helper with lines such as protocol=https and host=github.com; it answers only
# when both are the configured GitHub's, and says nothing (so git has no credential) otherwise.
_CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || return 0; h=; p=; '
    'while IFS= read -r l && test -n "$l"; do case "$l" in '
    'host=*) h="${l#host=}";; protocol=*) p="${l#protocol=}";; esac; done; '
    f'test -n "${HOST_VARIABLE}" && test "$h" = "${HOST_VARIABLE}" && '
    f'test "$p" = "${PROTOCOL_VARIABLE}" || return 0; '
    f'echo username=x-access-token; echo "password=${TOKEN_VARIABLE}"; }}; f'
)
REMOTE = "origin"
"""How callers name the remote; the runner puts the explicit URL in its place, so no
``remote.*`` or ``url.*`` setting in the clone can send the token elsewhere."""
ALL_BRANCHES = f"+refs/heads/*:refs/remotes/{REMOTE}/*"


def tracking(branch: str) -> str:
    """The full name of origin's ``branch`` as last fetched. Never the short ``origin/<b>``:
    a ref the agent makes (a tag or a local branch called ``origin/main``) would take its
    place in git's lookup."""
    return f"refs/remotes/{REMOTE}/{branch}"


_REMOTE_COMMANDS = frozenset({"fetch", "ls-remote", "push"})
_DANGEROUS_CONFIG = (
    "url.",
    "remote.",
    "credential",
    "http.",
    "https.",
    "protocol.",
    "include",
    "core.sshcommand",
    "core.gitproxy",
    "core.askpass",
    "core.hookspath",
    "core.fsmonitor",
    "extensions.worktreeconfig",
)
_KEPT_CONFIG = frozenset({f"remote.{REMOTE}.url", f"remote.{REMOTE}.fetch"})
_TIMEOUT_PREFIX = "Timeout:"  # how GitPython reports a command it killed at kill_after_timeout


@dataclass(frozen=True)
class CommitIdentity:
    """The name and email on the factory's commits and merges (from settings)."""

    name: str
    email: str


@dataclass(frozen=True)
class Result:
    status: int
    stdout: str
    stderr: str


class GitRunner:
    """Runs git commands for one place (the clone or a Worktree) with the environment above.

    Only the commands that talk to ``origin`` (``fetch``, ``ls-remote``, ``push``) get the
    credential helper and the token; the others, which may run the repository's hooks
    (``worktree add``, ``commit``, ``merge``), never see it.
    """

    def __init__(
        self,
        runner: gitpython.Git,
        place: str,
        env: Mapping[str, str],
        remote_env: Callable[[], Mapping[str, str]],
        timeout: float,
        scrub: Scrubber,
        remote_url: str,
        git_dir: Path,
        alternates: Path | None = None,
    ) -> None:
        self._remote_url = remote_url
        self._git_dir = git_dir
        self._alternates = alternates
        self._runner = runner
        self._place = place
        self._env = dict(env)
        self._remote_env = remote_env
        self._timeout = timeout
        self._scrub = scrub

    def run(self, *args: str, check: bool = True, fix: str = "") -> Result:
        """Run ``git <args>``; with ``check``, a non-zero exit raises GitError naming ``fix``.
        In a command that talks to the remote, ``REMOTE`` stands for the explicit URL; one
        that names no ``REMOTE`` (a fetch from the managed clone's path) gets no token."""
        self._distrust_the_agents_files()
        if args[0] not in _REMOTE_COMMANDS or REMOTE not in args:
            return self._execute(args, self._env, check, fix)
        self._drop_dangerous_config()
        sent = tuple(self._remote_url if arg == REMOTE else arg for arg in args)
        # Built for each command: a GitHub App's token is renewed under a long Run.
        result = self._execute(sent, self._remote_env(), check=False, fix=fix)
        if check and result.status != 0:
            raise self.error(args, result, fix)
        return result

    def _distrust_the_agents_files(self) -> None:
        """The agent can write its Worktree's own repository (a commit needs it). Before any of
        thirdshift's own git commands, undo what would make them read outside it or see a
        history other than the real one: alternates and grafts files, a ``shallow`` list, and
        links anywhere in it (git follows a linked ref or object directory into another
        repository, hidden from the agent but not from thirdshift); then write back the one
        alternate a Worktree's repository has, the managed clone's objects (adr/0042)."""
        common = self._git_dir
        for planted in (
            common / "objects" / "info" / "alternates",
            common / "objects" / "info" / "http-alternates",
            common / "info" / "grafts",
            common / "shallow",
        ):
            _remove_planted(planted)
        # A link anywhere in the clone (a ref, a loose-object directory, info/) could make
        # thirdshift's git read, or its own writes land, outside it; a FIFO or a device (a
        # packed-refs git would block on, or read without end) is no file of a repository.
        for stray in _neither_files_nor_directories(common):
            Path(stray).unlink(missing_ok=True)
        if self._alternates is not None:
            info = common / "objects" / "info"
            info.mkdir(parents=True, exist_ok=True)
            (info / "alternates").write_text(f"{self._alternates}\n")

    def _drop_dangerous_config(self) -> None:
        """Remove configuration that could redirect the token or run code (see the module),
        and any per-Worktree configuration file an agent may have made."""
        listed = self._execute(
            ("config", "--local", "--name-only", "--list"), self._env, check=False, fix=""
        )
        for key in sorted(set(listed.stdout.split())):
            lowered = key.lower()
            if lowered.startswith(_DANGEROUS_CONFIG) and lowered not in _KEPT_CONFIG:
                self._execute(("config", "--local", "--unset-all", key), self._env, False, "")
        for extra in (
            self._git_dir / "config.worktree",
            *self._git_dir.glob("worktrees/*/config.worktree"),
        ):
            extra.unlink(missing_ok=True)

    def _execute(
        self, args: Sequence[str], env: Mapping[str, str], check: bool, fix: str
    ) -> Result:
        try:
            status, stdout, stderr = self._runner.execute(
                ["git", *args],
                env=dict(env),
                kill_after_timeout=self._timeout,
                with_extended_output=True,
                with_exceptions=False,
                strip_newline_in_stdout=False,
                start_new_session=True,
            )
        except gitpython.GitCommandNotFound as exc:
            raise GitError(
                f"git {args[0]} could not start in {self._place}: git is not installed or not "
                "on PATH; install git"
            ) from exc
        result = Result(int(status), str(stdout), str(stderr))
        if check and result.status != 0:
            raise self.error(args, result, fix)
        return result

    def error(self, args: Sequence[str], result: Result, fix: str = "") -> GitError:
        return GitError(self.describe(args, result, fix))

    def describe(self, args: Sequence[str], result: Result, fix: str = "") -> str:
        # Shown as a person would type it: the remote by name, the default refspec left out.
        command = "git " + " ".join(shlex.quote(a) for a in args if a != ALL_BRANCHES)
        if result.stderr.startswith(_TIMEOUT_PREFIX):
            what = f"did not finish within {self._timeout:g}s and was stopped"
            fix = "check that the remote answers, or raise the git timeout"
        else:
            detail = _last_lines(self._scrub(result.stderr or result.stdout))
            what = f"failed (exit {result.status})" + (f": {detail}" if detail else "")
        return f"{command} {what}, in {self._place}" + (f"; {fix}" if fix else "")


def make_git(
    runner: gitpython.Git,
    place: str,
    identity: CommitIdentity,
    token: Callable[[], str] | None,
    dirs: tuple[Path, Path, Path | None],
    timeout: float,
    scrub: Scrubber,
    blank: tuple[str, ...],
    remote_url: str,
    *,
    alternates: Path | None = None,
) -> GitRunner:
    """A runner for the place whose git dir, common dir and work tree are ``dirs``, talking
    to ``remote_url`` (and only there does the credential helper answer); ``alternates``, the
    one object directory it borrows from (the managed clone's, for a Worktree's own
    repository)."""
    return GitRunner(
        runner,
        place,
        _environment(identity, None, blank, None, *dirs),
        lambda: _environment(
            identity, None if token is None else token(), blank, remote_url, *dirs
        ),
        timeout,
        scrub,
        remote_url,
        dirs[1],
        alternates,
    )


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("hint:")]
    return " / ".join(lines[-count:])


def _environment(
    identity: CommitIdentity,
    token: str | None,
    blank: tuple[str, ...],
    remote_url: str | None,
    git_dir: Path,
    common_dir: Path,
    work_tree: Path | None,
) -> dict[str, str]:
    """The variables layered over the caller's environment for a git command: with a
    ``token``, the credential helper and the token; with None, neither. The variables named
    in ``blank`` (secrets of thirdshift's own environment) are emptied."""
    config: list[tuple[str, str]] = [
        ("credential.helper", ""),  # forget any helper configured anywhere else
        ("core.hooksPath", os.devnull),
        ("core.fsmonitor", "false"),
        ("commit.gpgSign", "false"),
        ("tag.gpgSign", "false"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        # The agent can make a submodule whose own config git would read (a filter, an ext::
        # URL): thirdshift's git never steps into one, and never runs a command as transport.
        ("submodule.recurse", "false"),
        ("fetch.recurseSubmodules", "false"),
        ("push.recurseSubmodules", "no"),
        ("diff.ignoreSubmodules", "all"),
        ("status.submoduleSummary", "false"),
        ("protocol.ext.allow", "never"),
    ]
    if token is not None:
        config.append(("credential.helper", _CREDENTIAL_HELPER))
    env = dict.fromkeys(blank, "")
    env |= {
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_CONFIG_PARAMETERS": "",
        "GIT_DIR": str(git_dir),
        "GIT_COMMON_DIR": str(common_dir),
        "GIT_OBJECT_DIRECTORY": str(common_dir / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
        "GIT_NO_REPLACE_OBJECTS": "1",  # refs/replace, which the agent can write, is not history
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
        "GIT_CONFIG_COUNT": str(len(config)),
        TOKEN_VARIABLE: token or "",
        HOST_VARIABLE: "",
        PROTOCOL_VARIABLE: "",
    }
    if token is not None and remote_url is not None:
        where = urlsplit(remote_url)
        env[HOST_VARIABLE] = where.netloc.rsplit("@", 1)[-1]
        env[PROTOCOL_VARIABLE] = where.scheme
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
        env["GIT_INDEX_FILE"] = str(git_dir / "index")
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _remove_planted(planted: Path) -> None:
    """Remove what the agent left at ``planted``: a link, a file, a FIFO, or a whole directory
    (where git expects a file, it would otherwise stop thirdshift's every git command)."""
    try:
        if planted.is_dir() and not planted.is_symlink():
            shutil.rmtree(planted)
        else:
            planted.unlink(missing_ok=True)
    except OSError as exc:  # the agent took a directory's permissions away, say
        raise _unchecked(f"cannot remove {exc.filename or planted}", exc) from exc


def _unchecked(problem: str, exc: OSError) -> GitError:
    return GitError(
        f"{problem} in the repository thirdshift checks before each of its git commands "
        f"({exc.strerror}); give the directory back its permissions (chmod u+rwx) or remove "
        "the Worktree"
    )


def _neither_files_nor_directories(top: Path) -> Iterator[str]:
    """Every entry under ``top`` that is not a regular file or a directory (links, FIFOs,
    devices, sockets), never following a link. It runs before each of thirdshift's git
    commands: the type comes from the directory listing itself, with no stat of each entry."""
    folders = [str(top)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    elif not entry.is_file(follow_symlinks=False):
                        yield entry.path
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:  # the agent took a directory's permissions away, say
            raise _unchecked(f"cannot read {exc.filename}", exc) from exc
