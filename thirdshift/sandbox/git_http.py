"""The git side of the GitHub stand-in: real bare repositories served over smart HTTP.

``BareRepos`` keeps one bare repository per ``owner/name`` under a root directory, laid out as
``<root>/<owner>/<name>.git``. Every piece of git work is a ``git`` subprocess with an argv list,
an explicit ``cwd``, a timeout and an environment cut off from the user's git configuration, so
the stand-in behaves the same on every machine.

Pushes and fetches go through ``git http-backend`` run as a CGI program (``serve_git``).
Authentication is the HTTP layer's job; this module trusts whatever request reaches it. Each
repository has ``http.receivepack`` on, refuses non-fast-forward updates and allows deletions.
A ``post-receive`` hook records the refs each push updated into a file named by the request, so
``on_push`` subscribers hear exactly what that push changed, even when pushes run concurrently.

Additions to the agreed interface (all optional, nothing changed):

- ``GitHttpRequest.git_protocol`` (default ``""``): the client's ``Git-Protocol`` header; pass
  it through to let git speak protocol version 2.
- ``GitHttpRequest.content_encoding`` (default ``""``): the ``Content-Encoding`` header. A gzip
  body is unpacked either way (it is recognised by its magic bytes, which a pkt-line body never
  starts with), so passing it is optional.
- ``BareRepos(root, timeout=...)``: the subprocess timeout in seconds.
- ``BareRepos.path(owner, name)``: where a repository lives, for the simulated CI's checkouts.

About 560 lines: the repositories, their refs with what git said of them remembered, merges and
the smart-HTTP bridge are one object whose writes and reads must see each other.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar, cast

from thirdshift.errors import SandboxError

__all__ = [
    "ZERO_SHA",
    "BareRepos",
    "CommitInfo",
    "GitHttpRequest",
    "GitHttpResponse",
    "PushEvent",
    "git_env",
]

log = logging.getLogger(__name__)

ZERO_SHA = "0" * 40
"""The sha git reports for a ref that does not exist (the new sha of a deleted branch)."""

STAND_IN_NAME = "GitHub"
STAND_IN_EMAIL = "noreply@github.com"
INITIAL_DATE = "2024-01-01T00:00:00+00:00"
INITIAL_MESSAGE = "Initial commit"

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_HEX = re.compile(r"^[0-9a-f]{4,40}$")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
T = TypeVar("T")
_TEXT = ("Content-Type", "text/plain")
_PUSH_LOG_VAR = "THIRDSHIFT_PUSH_LOG"
_POST_RECEIVE = f"""#!/bin/sh
# Written by the thirdshift GitHub stand-in: records "<old> <new> <ref>" for each updated ref.
if [ -n "${_PUSH_LOG_VAR}" ]; then
    cat >> "${_PUSH_LOG_VAR}"
fi
"""


@dataclass(frozen=True)
class CommitInfo:
    """One commit as the stand-in reports it."""

    sha: str
    message: str
    author_name: str
    author_email: str
    authored_at: datetime
    parents: tuple[str, ...]


@dataclass(frozen=True)
class PushEvent:
    """One ref a push updated; ``new_sha`` is all zeros when the push deleted the ref."""

    owner: str
    name: str
    ref: str
    old_sha: str
    new_sha: str
    pusher: str = ""  # the login the push authenticated as


@dataclass(frozen=True)
class GitHttpRequest:
    """A smart-HTTP request for one repository, already authenticated by the HTTP layer.

    ``path_info`` is what follows ``<name>.git`` in the URL, e.g. ``/info/refs``.
    """

    method: str
    owner: str
    name: str
    path_info: str
    query_string: str
    content_type: str
    body: bytes
    remote_user: str
    git_protocol: str = ""
    content_encoding: str = ""


@dataclass(frozen=True)
class GitHttpResponse:
    """What ``git http-backend`` answered: status, headers in order, and the body."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git subprocess: the caller's, minus every ``GIT_*`` variable, with
    the global and system git configuration switched off and prompts disabled."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


def _stand_in_identity(date: str | None = None) -> dict[str, str]:
    env = {
        "GIT_AUTHOR_NAME": STAND_IN_NAME,
        "GIT_AUTHOR_EMAIL": STAND_IN_EMAIL,
        "GIT_COMMITTER_NAME": STAND_IN_NAME,
        "GIT_COMMITTER_EMAIL": STAND_IN_EMAIL,
    }
    if date is not None:
        env["GIT_AUTHOR_DATE"] = date
        env["GIT_COMMITTER_DATE"] = date
    return env


class BareRepos:
    """Bare repositories of the stand-in, one per ``owner/name``, under ``root``.

    Methods that name a repository raise ``SandboxError`` when it does not exist (``create``
    raises when it already does). Thread-safe: git itself locks refs, and ``merge`` updates its
    branch with a compare-and-swap so a concurrent push is never lost.

    Every pull request, check and status the API shapes asks git for refs and merges: what git
    said is remembered, the objects' answers for good (a sha names the same commit forever), the
    refs' until a write through this class or any change to the ref files (``_refs_key``).
    """

    def __init__(self, root: Path, *, timeout: float = 120.0) -> None:
        self._root = root
        self._timeout = timeout
        self._callbacks: list[Callable[[PushEvent], None]] = []
        self._lock = threading.Lock()
        self._writes = 0
        self._said: dict[tuple[object, ...], object] = {}

    # -- repositories -----------------------------------------------------------------------

    def path(self, owner: str, name: str) -> Path:
        """The directory of ``owner/name``'s bare repository (it may not exist)."""
        for part in (owner, name):
            if not _NAME.match(part) or part.endswith(".git"):
                raise SandboxError(
                    f"{owner}/{name} is not a valid repository name; use letters, digits, "
                    "'.', '-' and '_' only"
                )
        return self._root / owner / f"{name}.git"

    def exists(self, owner: str, name: str) -> bool:
        """Whether ``owner/name`` has been created."""
        return (self.path(owner, name) / "HEAD").is_file()

    def create(self, owner: str, name: str, source_dir: Path) -> str:
        """Create ``owner/name`` with ``source_dir``'s files as the first commit on ``main``.

        The commit has a fixed author, committer, date and message, so the same files always
        give the same sha. Returns that sha.
        """
        repo = self.path(owner, name)
        if repo.exists():
            raise SandboxError(f"repository {owner}/{name} already exists in the stand-in")
        if not source_dir.is_dir():
            raise SandboxError(f"cannot create {owner}/{name}: {source_dir} is not a directory")
        repo.parent.mkdir(parents=True, exist_ok=True)
        self._git(["init", "--quiet", "--bare", "--initial-branch=main", str(repo)], repo.parent)
        for key, value in (
            ("http.receivepack", "true"),
            ("http.uploadpack", "true"),
            ("receive.denyNonFastForwards", "true"),
            ("receive.denyDeletes", "false"),
            ("core.logAllRefUpdates", "true"),
        ):
            self._git(["config", key, value], repo)
        hook = repo / "hooks" / "post-receive"
        hook.write_text(_POST_RECEIVE)
        hook.chmod(0o755)

        with tempfile.TemporaryDirectory(prefix="thirdshift-index-") as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            work = ["--git-dir", str(repo), "--work-tree", str(source_dir)]
            self._git([*work, "add", "--all", "--force", "."], source_dir, env=index)
            tree = self._git([*work, "write-tree"], source_dir, env=index).strip()
        sha = self._git(
            ["commit-tree", tree, "-m", INITIAL_MESSAGE],
            repo,
            env=_stand_in_identity(INITIAL_DATE),
        ).strip()
        self._git(["update-ref", "refs/heads/main", sha, ZERO_SHA], repo)
        self._wrote()
        return sha

    # -- refs -------------------------------------------------------------------------------

    def branches(self, owner: str, name: str) -> dict[str, str]:
        """Every branch of ``owner/name`` with the sha it points at."""
        repo = self._existing(owner, name)
        key = ("branches", *self._refs_key(repo))
        said = self._said.get(key)
        if isinstance(said, dict):
            return dict(said)
        out = self._git(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"], repo)
        result: dict[str, str] = {}
        for line in out.splitlines():
            sha, ref = line.split(" ", 1)
            result[ref.removeprefix("refs/heads/")] = sha
        self._said[key] = dict(result)
        return result

    def resolve(self, owner: str, name: str, ref: str) -> str | None:
        """The full commit sha for a branch name, a full ref, or a (possibly abbreviated) sha;
        ``None`` when nothing matches."""
        repo = self._existing(owner, name)
        if not ref or ref.startswith("-"):
            return None
        candidates = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}"]
        if _HEX.match(ref):
            candidates.append(ref)
        for candidate in candidates:
            # A full sha that is a commit stays one; a ref, or its absence, holds until the
            # refs change (a CI watch asks for refs/heads/<sha> at every look). A sha missing
            # now may be pushed later: that is asked again.
            commit = _FULL_SHA.match(candidate) is not None
            key = (
                ("commit", str(repo), candidate)
                if commit
                else ("ref", *self._refs_key(repo), candidate)
            )
            if key in self._said:
                said = self._said[key]
                if isinstance(said, str):
                    return said
                continue
            done = self._run(
                ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"],
                repo,
            )
            if done.returncode == 0:
                sha = done.stdout.decode().strip()
                self._said[key] = sha
                return sha
            if not commit:
                self._said[key] = None
        return None

    def delete_branch(self, owner: str, name: str, branch: str) -> None:
        """Delete ``branch``; raises ``SandboxError`` when it does not exist. Fires no push."""
        repo = self._existing(owner, name)
        ref = branch if branch.startswith("refs/heads/") else f"refs/heads/{branch}"
        sha = self.resolve(owner, name, ref)
        if sha is None:
            raise SandboxError(f"branch {branch} does not exist in {owner}/{name}")
        self._git(["update-ref", "-d", ref, sha], repo)
        self._wrote()

    # -- merging ----------------------------------------------------------------------------

    def trial_merge(self, owner: str, name: str, base_ref: str, head_sha: str) -> bool:
        """Whether ``head_sha`` merges into ``base_ref`` without conflicts. Writes no ref."""
        repo = self._existing(owner, name)
        base, head = (
            self._commit_sha(owner, name, base_ref),
            self._commit_sha(owner, name, head_sha),
        )
        return self._merge_tree(repo, base, head) is not None

    def merge(self, owner: str, name: str, base_branch: str, head_sha: str, message: str) -> str:
        """Merge ``head_sha`` into ``base_branch`` with a two-parent commit by the stand-in's
        identity and return its sha. Raises ``SandboxError`` on a conflict, or when the branch
        moved while merging (merge again)."""
        repo = self._existing(owner, name)
        ref = f"refs/heads/{base_branch.removeprefix('refs/heads/')}"
        base = self._commit_sha(owner, name, ref)
        head = self._commit_sha(owner, name, head_sha)
        tree = self._merge_tree(repo, base, head)
        if tree is None:
            raise SandboxError(
                f"{head[:12]} does not merge cleanly into {base_branch} of {owner}/{name}; "
                "resolve the conflict on the head branch and push again"
            )
        sha = self._git(
            ["commit-tree", tree, "-p", base, "-p", head, "-F", "-"],
            repo,
            env=_stand_in_identity(),
            stdin=message.encode(),
        ).strip()
        done = self._run(["update-ref", "-m", "merge", ref, sha, base], repo)
        self._wrote()
        if done.returncode != 0:
            raise SandboxError(
                f"{base_branch} of {owner}/{name} moved while merging {head[:12]}; merge again"
            )
        return sha

    def commit(self, owner: str, name: str, sha: str) -> CommitInfo:
        """The commit ``sha`` (a ref or abbreviation works too); ``SandboxError`` if unknown."""
        repo = self._existing(owner, name)
        full = self._commit_sha(owner, name, sha)
        out = self._git(
            ["log", "-1", "--format=%H%x00%an%x00%ae%x00%aI%x00%P%x00%B", full, "--"], repo
        )
        sha_, an, ae, date, parents, message = out.split("\x00", 5)
        return CommitInfo(
            sha=sha_,
            message=message.rstrip("\n"),
            author_name=an,
            author_email=ae,
            authored_at=datetime.fromisoformat(date),
            parents=tuple(parents.split()),
        )

    # -- smart HTTP -------------------------------------------------------------------------

    def on_push(self, callback: Callable[[PushEvent], None]) -> None:
        """Call ``callback`` once for every ref a push over ``serve_git`` updated, after the
        response is built. A callback that raises is logged and does not affect the push."""
        with self._lock:
            self._callbacks.append(callback)

    def serve_git(self, request: GitHttpRequest) -> GitHttpResponse:
        """Answer one smart-HTTP request by running ``git http-backend`` as a CGI program."""
        try:
            found = self.exists(request.owner, request.name)
        except SandboxError:
            found = False
        if not found:
            return GitHttpResponse(404, [_TEXT], b"Repository not found.\n")
        try:
            body = _decode_body(request)
        except (OSError, EOFError, zlib.error) as exc:
            return GitHttpResponse(
                400, [_TEXT], f"Cannot decode the request body: {exc}\n".encode()
            )
        is_push = request.path_info.rstrip("/") == "/git-receive-pack"
        with tempfile.TemporaryDirectory(prefix="thirdshift-push-") as tmp:
            push_log = Path(tmp) / "updates"
            env = {
                "GIT_PROJECT_ROOT": str(self._root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": f"/{request.owner}/{request.name}.git{request.path_info}",
                "REQUEST_METHOD": request.method.upper(),
                "QUERY_STRING": request.query_string,
                "CONTENT_TYPE": request.content_type,
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": request.remote_user,
                "REMOTE_ADDR": "127.0.0.1",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": "HTTP/1.1",
                _PUSH_LOG_VAR: str(push_log) if is_push else "",
            }
            if request.git_protocol:
                env["GIT_PROTOCOL"] = request.git_protocol
            done = self._run(["http-backend"], self._root, env=env, stdin=body)
            if is_push:
                self._wrote()
            response = _parse_cgi(done.stdout)
            if done.returncode != 0 and response.status < 400:
                log.warning(
                    "git http-backend exited %d for %s %s: %s",
                    done.returncode,
                    request.method,
                    env["PATH_INFO"],
                    done.stderr.decode(errors="replace").strip(),
                )
            events = (
                _read_push_log(push_log, request.owner, request.name, request.remote_user)
                if is_push
                else []
            )
        with self._lock:
            callbacks = list(self._callbacks)
        for event in events:
            for callback in callbacks:
                try:
                    callback(event)
                except Exception:
                    log.exception("on_push callback failed for %s", event)
        return response

    # -- internals --------------------------------------------------------------------------

    def _existing(self, owner: str, name: str) -> Path:
        repo = self.path(owner, name)
        if not (repo / "HEAD").is_file():
            raise SandboxError(f"repository {owner}/{name} does not exist in the stand-in")
        return repo

    def _commit_sha(self, owner: str, name: str, ref: str) -> str:
        sha = self.resolve(owner, name, ref)
        if sha is None:
            raise SandboxError(f"{ref} is not a commit of {owner}/{name}")
        return sha

    def _merge_tree(self, repo: Path, base: str, head: str) -> str | None:
        """The merged tree's sha, or ``None`` when the merge conflicts (two shas merge the same
        way forever)."""
        key = ("merge-tree", str(repo), base, head)
        if key in self._said:
            return cast("str | None", self._said[key])
        done = self._run(["merge-tree", "--write-tree", "--no-messages", base, head], repo)
        if done.returncode == 1:
            self._said[key] = None
            return None
        if done.returncode != 0:
            raise SandboxError(
                f"git merge-tree failed (exit {done.returncode}) in {repo.name}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        tree = done.stdout.decode().split("\n", 1)[0].strip()
        self._said[key] = tree
        return tree

    def remembered(self, key: tuple[str, ...], answer: Callable[[], T]) -> T:
        """``answer()``, asked once per ``key``: for what never changes, such as what git says
        of two commits named by their full shas."""
        if key not in self._said:
            self._said[key] = answer()
        return cast("T", self._said[key])

    def _wrote(self) -> None:
        """A write through this class: every ref read before it is read again."""
        with self._lock:
            self._writes += 1

    def _refs_key(self, repo: Path) -> tuple[object, ...]:
        """What the refs' answers hold for: the writes made here, and each ref file's identity
        (git replaces a ref file by renaming a new one onto it), so a write from elsewhere
        counts too."""
        files: list[tuple[object, ...]] = []
        for place in (repo / "packed-refs", repo / "HEAD"):
            try:
                stat = place.stat()
            except FileNotFoundError:
                continue
            files.append((place.name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        for directory, _, names in os.walk(repo / "refs"):
            for name in names:
                try:
                    stat = os.stat(os.path.join(directory, name))
                except FileNotFoundError:
                    continue
                files.append((directory, name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return (str(repo), self._writes, *sorted(files, key=repr))

    def _run(
        self,
        args: list[str],
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                ["git", *args],
                cwd=cwd,
                env=git_env(env),
                input=stdin,
                capture_output=True,
                timeout=self._timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SandboxError(
                f"git {args[0]} timed out after {self._timeout:g} s in {cwd.name}"
            ) from exc
        except OSError as exc:
            raise SandboxError(f"cannot run git ({exc}); install git 2.38 or later") from exc

    def _git(
        self,
        args: list[str],
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes = b"",
    ) -> str:
        done = self._run(args, cwd, env=env, stdin=stdin)
        if done.returncode != 0:
            raise SandboxError(
                f"git {args[0]} failed (exit {done.returncode}) in {cwd.name}: "
                f"{done.stderr.decode(errors='replace').strip()}"
            )
        return done.stdout.decode()


def _decode_body(request: GitHttpRequest) -> bytes:
    """The request body with any gzip content encoding removed."""
    encoding = request.content_encoding.strip().lower()
    if encoding in ("gzip", "x-gzip") or request.body[:2] == b"\x1f\x8b":
        return gzip.decompress(request.body)
    return request.body


def _parse_cgi(output: bytes) -> GitHttpResponse:
    """Split CGI output into status, headers and body."""
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = output.partition(b"\n\n")
    if not sep:
        return GitHttpResponse(502, [_TEXT], b"git http-backend gave no CGI headers.\n")
    status = 200
    headers: list[tuple[str, str]] = []
    for raw in head.decode("latin-1").splitlines():
        key, _, value = raw.partition(":")
        key, value = key.strip(), value.strip()
        if not key:
            continue
        if key.lower() == "status":
            status = int(value.split(" ", 1)[0])
        else:
            headers.append((key, value))
    return GitHttpResponse(status, headers, body)


def _read_push_log(path: Path, owner: str, name: str, pusher: str) -> list[PushEvent]:
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            old, new, ref = parts
            events.append(
                PushEvent(owner=owner, name=name, ref=ref, old_sha=old, new_sha=new, pusher=pusher)
            )
    return events
