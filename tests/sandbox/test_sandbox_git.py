"""The stand-in's bare repositories against the real git client over real smart HTTP.

A tiny loopback server checks basic auth itself and forwards ``/<owner>/<name>.git/...`` to
``BareRepos.serve_git``; the git client gets its token from a credential helper that reads the
environment, never from the URL or argv.
"""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.git_client import git_as
from thirdshift.errors import SandboxError
from thirdshift.sandbox.git_http import (
    ZERO_SHA,
    BareRepos,
    GitHttpRequest,
    PushEvent,
    git_env,
)

TOKEN = "ghs_sandboxtoken123"
PUSHER = "x-access-token"  # the basic-auth user git sends, which serve_git is told


class _Handler(BaseHTTPRequestHandler):
    """Forwards git smart-HTTP requests to ``serve_git`` once basic auth carries the token."""

    server: _GitServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def _forward(self) -> None:
        body = self._read_body()
        path, _, query = self.path.partition("?")
        owner, _, rest = path.lstrip("/").partition("/")
        name, dot_git, path_info = rest.partition(".git")
        user = self._authenticated_user()
        if not dot_git:
            self._send(404, [("Content-Type", "text/plain")], b"not a git URL\n")
            return
        if user is None:
            self._send(
                401,
                [("WWW-Authenticate", 'Basic realm="GitHub"'), ("Content-Type", "text/plain")],
                b"authentication required\n",
            )
            return
        response = self.server.repos.serve_git(
            GitHttpRequest(
                method=self.command,
                owner=owner,
                name=name,
                path_info=path_info,
                query_string=query,
                content_type=self.headers.get("Content-Type", ""),
                body=body,
                remote_user=user,
                git_protocol=self.headers.get("Git-Protocol", ""),
                content_encoding=self.headers.get("Content-Encoding", ""),
            )
        )
        self._send(response.status, response.headers, response.body)

    def _authenticated_user(self) -> str | None:
        scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        user, _, password = base64.b64decode(encoded).decode().partition(":")
        return user if password == self.server.token else None

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in ("content-length", "transfer-encoding"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _GitServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, repos: BareRepos, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos = repos
        self.token = token


@dataclass
class GitWorld:
    """The stand-in's repositories behind a loopback server, and a git client that talks to it."""

    repos: BareRepos
    url: str
    tmp: Path

    def remote(self, owner: str, name: str) -> str:
        return f"{self.url}/{owner}/{name}.git"

    def git(
        self, *args: str, cwd: Path, token: str | None = TOKEN, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the real git client; the token reaches it only through the credential helper."""
        return git_as(token, *args, cwd=cwd, login="ada", check=check)

    def clone(self, owner: str, name: str, into: str) -> Path:
        self.git("clone", "--quiet", self.remote(owner, name), into, cwd=self.tmp)
        return self.tmp / into

    def commit_file(self, checkout: Path, path: str, text: str, message: str) -> str:
        (checkout / path).write_text(text)
        self.git("add", path, cwd=checkout)
        self.git("commit", "--quiet", "-m", message, cwd=checkout)
        return self.git("rev-parse", "HEAD", cwd=checkout).stdout.strip()


def make_source(tmp: Path) -> Path:
    """A small project directory to seed a repository with."""
    source = tmp / "source"
    source.mkdir()
    (source / "README.md").write_text("# demo\n")
    (source / "app.py").write_text("def answer():\n    return 41\n")
    return source


@contextmanager
def serving(repos: BareRepos, tmp: Path) -> Iterator[GitWorld]:
    """Serve ``repos`` on a loopback port while the block runs."""
    server = _GitServer(repos, TOKEN)
    # A short poll, so shutdown at the end of each test takes no half second.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield GitWorld(repos=repos, url=f"http://{host!s}:{port}", tmp=tmp)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def git_world(tmp_path: Path) -> Iterator[GitWorld]:
    """Repositories under tmp_path served on a loopback port for the test's duration."""
    with serving(BareRepos(tmp_path / "repos"), tmp_path) as world:
        yield world


@pytest.fixture
def seeded(git_world: GitWorld) -> str:
    """Create acme/demo from a small source tree; returns the first commit's sha."""
    return git_world.repos.create("acme", "demo", make_source(git_world.tmp))


def test_create_makes_one_fixed_commit_on_main(git_world: GitWorld, seeded: str) -> None:
    """The first commit holds the source files, has no parent and a fixed identity and date."""
    repos = git_world.repos
    assert repos.exists("acme", "demo")
    assert not repos.exists("acme", "other")
    assert repos.branches("acme", "demo") == {"main": seeded}
    info = repos.commit("acme", "demo", seeded)
    assert info.parents == ()
    assert (info.author_name, info.author_email) == ("GitHub", "noreply@github.com")
    assert info.authored_at.isoformat() == "2024-01-01T00:00:00+00:00"
    again = BareRepos(git_world.tmp / "again").create("acme", "demo", git_world.tmp / "source")
    assert again == seeded
    with pytest.raises(SandboxError, match="already exists"):
        repos.create("acme", "demo", git_world.tmp / "source")


def test_resolve_accepts_branch_full_ref_and_abbreviated_sha(
    git_world: GitWorld, seeded: str
) -> None:
    """A branch name, refs/heads/x or a short sha resolve to the full sha; unknowns to None."""
    repos = git_world.repos
    assert repos.resolve("acme", "demo", "main") == seeded
    assert repos.resolve("acme", "demo", "refs/heads/main") == seeded
    assert repos.resolve("acme", "demo", seeded[:7]) == seeded
    assert repos.resolve("acme", "demo", "nope") is None
    assert repos.resolve("acme", "demo", "deadbeef") is None
    with pytest.raises(SandboxError, match="does not exist"):
        repos.resolve("acme", "missing", "main")


def test_a_ref_not_found_is_found_once_the_refs_change(git_world: GitWorld, seeded: str) -> None:
    """Answers are kept until the refs change, misses too: a branch pushed after a look that
    found nothing is found by the next look, and one deleted is gone."""
    repos = git_world.repos
    assert repos.resolve("acme", "demo", "later") is None
    assert repos.resolve("acme", "demo", "later") is None
    checkout = git_world.clone("acme", "demo", "work")
    git_world.git("push", "--quiet", "origin", "HEAD:refs/heads/later", cwd=checkout)
    assert repos.resolve("acme", "demo", "later") == seeded
    repos.delete_branch("acme", "demo", "later")
    assert repos.resolve("acme", "demo", "later") is None


def test_repository_names_cannot_escape_the_root(git_world: GitWorld) -> None:
    """Owner and name are single path components; anything else is refused."""
    for owner, name in (("..", "x"), ("acme", "../../etc"), ("a/b", "c"), ("acme", "x.git")):
        with pytest.raises(SandboxError, match="not a valid repository name"):
            git_world.repos.path(owner, name)


def test_clone_over_http_with_credential_helper(git_world: GitWorld, seeded: str) -> None:
    """The real git client clones through serve_git and gets the first commit."""
    checkout = git_world.clone("acme", "demo", "work")
    assert (checkout / "app.py").read_text() == "def answer():\n    return 41\n"
    assert git_world.git("rev-parse", "HEAD", cwd=checkout).stdout.strip() == seeded


def test_clone_with_protocol_v2_header(git_world: GitWorld, seeded: str) -> None:
    """Passing the Git-Protocol header through lets the client speak protocol version 2."""
    done = git_world.git(
        "-c",
        "protocol.version=2",
        "clone",
        "--quiet",
        git_world.remote("acme", "demo"),
        "v2",
        cwd=git_world.tmp,
    )
    assert done.returncode == 0
    response = git_world.repos.serve_git(
        GitHttpRequest(
            method="GET",
            owner="acme",
            name="demo",
            path_info="/info/refs",
            query_string="service=git-upload-pack",
            content_type="",
            body=b"",
            remote_user="x",
            git_protocol="version=2",
        )
    )
    assert response.status == 200
    assert b"version 2" in response.body


def test_push_lands_and_fires_on_push(git_world: GitWorld, seeded: str) -> None:
    """A pushed branch update reaches the bare repo and on_push hears old and new sha."""
    events: list[PushEvent] = []
    git_world.repos.on_push(events.append)
    checkout = git_world.clone("acme", "demo", "work")
    new = git_world.commit_file(checkout, "app.py", "def answer():\n    return 42\n", "Fix")
    git_world.git("push", "--quiet", "origin", "main", cwd=checkout)
    git_world.git("push", "--quiet", "origin", "HEAD:refs/heads/feature", cwd=checkout)
    assert git_world.repos.branches("acme", "demo") == {"main": new, "feature": new}
    assert events == [
        PushEvent("acme", "demo", "refs/heads/main", seeded, new, PUSHER),
        PushEvent("acme", "demo", "refs/heads/feature", ZERO_SHA, new, PUSHER),
    ]


def test_deleting_a_branch_by_push_reports_zero_new_sha(git_world: GitWorld, seeded: str) -> None:
    """Deletes are allowed over HTTP and announced with an all-zero new sha."""
    checkout = git_world.clone("acme", "demo", "work")
    git_world.git("push", "--quiet", "origin", "HEAD:refs/heads/gone", cwd=checkout)
    events: list[PushEvent] = []
    git_world.repos.on_push(events.append)
    git_world.git("push", "--quiet", "origin", "--delete", "gone", cwd=checkout)
    assert "gone" not in git_world.repos.branches("acme", "demo")
    assert events == [PushEvent("acme", "demo", "refs/heads/gone", seeded, ZERO_SHA, PUSHER)]


def test_non_fast_forward_push_is_rejected(git_world: GitWorld, seeded: str) -> None:
    """Even a forced push that would rewrite history is refused and fires nothing."""
    first = git_world.clone("acme", "demo", "one")
    second = git_world.clone("acme", "demo", "two")
    ahead = git_world.commit_file(first, "a.txt", "a\n", "A")
    git_world.git("push", "--quiet", "origin", "main", cwd=first)
    events: list[PushEvent] = []
    git_world.repos.on_push(events.append)
    git_world.commit_file(second, "b.txt", "b\n", "B")
    done = git_world.git("push", "--force", "origin", "main", cwd=second, check=False)
    assert done.returncode != 0
    assert "non-fast-forward" in done.stderr
    assert git_world.repos.branches("acme", "demo") == {"main": ahead}
    assert events == []


def test_push_without_the_token_is_refused(git_world: GitWorld, seeded: str) -> None:
    """The test server's basic-auth check turns away a push with no or a wrong token."""
    checkout = git_world.clone("acme", "demo", "work")
    git_world.commit_file(checkout, "c.txt", "c\n", "C")
    for token in (None, "wrong"):
        done = git_world.git("push", "origin", "main", cwd=checkout, token=token, check=False)
        assert done.returncode != 0
        assert "Authentication failed" in done.stderr or "could not read" in done.stderr
    assert git_world.repos.branches("acme", "demo") == {"main": seeded}


def test_gzip_request_body_is_unpacked(git_world: GitWorld, seeded: str) -> None:
    """An upload-pack negotiation sent gzip-compressed gets the same pack as a plain one."""
    want = f"want {seeded} ofs-delta\n"
    pkt = f"{len(want) + 4:04x}{want}".encode() + b"00000009done\n"

    def fetch(body: bytes, encoding: str) -> bytes:
        response = git_world.repos.serve_git(
            GitHttpRequest(
                method="POST",
                owner="acme",
                name="demo",
                path_info="/git-upload-pack",
                query_string="",
                content_type="application/x-git-upload-pack-request",
                body=body,
                remote_user="x",
                content_encoding=encoding,
            )
        )
        assert response.status == 200
        assert ("Content-Type", "application/x-git-upload-pack-result") in response.headers
        return response.body

    plain = fetch(pkt, "")
    assert b"PACK" in plain
    assert fetch(gzip.compress(pkt), "gzip") == plain


def test_unknown_repository_is_404(git_world: GitWorld) -> None:
    """serve_git answers 404 for a repository that does not exist or an invalid name."""
    for owner, name in (("acme", "nothing"), ("..", "etc")):
        response = git_world.repos.serve_git(
            GitHttpRequest("GET", owner, name, "/info/refs", "service=git-upload-pack", "", b"", "")
        )
        assert response.status == 404


def _diverge(world: GitWorld, *, conflict: bool) -> tuple[Path, str, str]:
    """Push a feature branch and a newer main; returns the checkout, main and feature shas."""
    checkout = world.clone("acme", "demo", "work")
    world.git("checkout", "--quiet", "-b", "feature", cwd=checkout)
    feature = world.commit_file(checkout, "app.py", "def answer():\n    return 42\n", "Feature")
    world.git("push", "--quiet", "origin", "feature", cwd=checkout)
    world.git("checkout", "--quiet", "main", cwd=checkout)
    if conflict:
        main = world.commit_file(checkout, "app.py", "def answer():\n    return 43\n", "Other")
    else:
        main = world.commit_file(checkout, "NOTES.md", "notes\n", "Notes")
    world.git("push", "--quiet", "origin", "main", cwd=checkout)
    return checkout, main, feature


def test_trial_merge_is_true_for_a_clean_merge(git_world: GitWorld, seeded: str) -> None:
    """Changes to different files merge cleanly; the trial writes no ref."""
    _, main, feature = _diverge(git_world, conflict=False)
    assert git_world.repos.trial_merge("acme", "demo", "main", feature)
    assert git_world.repos.branches("acme", "demo") == {"main": main, "feature": feature}


def test_trial_merge_is_false_for_a_conflict(git_world: GitWorld, seeded: str) -> None:
    """Two edits of the same line conflict, and merge refuses with SandboxError."""
    _, main, feature = _diverge(git_world, conflict=True)
    assert not git_world.repos.trial_merge("acme", "demo", "main", feature)
    with pytest.raises(SandboxError, match="does not merge cleanly"):
        git_world.repos.merge("acme", "demo", "main", feature, "Merge feature")
    assert git_world.repos.branches("acme", "demo") == {"main": main, "feature": feature}


def test_merge_creates_a_two_parent_commit(git_world: GitWorld, seeded: str) -> None:
    """merge writes a commit by the stand-in with base and head as parents, and moves base."""
    checkout, main, feature = _diverge(git_world, conflict=False)
    sha = git_world.repos.merge("acme", "demo", "main", feature[:10], "Merge pull request #1")
    info = git_world.repos.commit("acme", "demo", sha)
    assert info.parents == (main, feature)
    assert info.message == "Merge pull request #1"
    assert (info.author_name, info.author_email) == ("GitHub", "noreply@github.com")
    assert git_world.repos.resolve("acme", "demo", "main") == sha
    git_world.git("pull", "--quiet", "--ff-only", "origin", "main", cwd=checkout)
    assert (checkout / "NOTES.md").is_file()
    assert "return 42" in (checkout / "app.py").read_text()


def test_delete_branch_removes_it_and_rejects_unknown(git_world: GitWorld, seeded: str) -> None:
    """delete_branch drops the ref without firing on_push; an unknown branch is an error."""
    checkout = git_world.clone("acme", "demo", "work")
    git_world.git("push", "--quiet", "origin", "HEAD:refs/heads/topic", cwd=checkout)
    events: list[PushEvent] = []
    git_world.repos.on_push(events.append)
    git_world.repos.delete_branch("acme", "demo", "topic")
    assert git_world.repos.branches("acme", "demo") == {"main": seeded}
    assert events == []
    with pytest.raises(SandboxError, match="does not exist"):
        git_world.repos.delete_branch("acme", "demo", "topic")


def test_failing_push_callback_does_not_break_the_push(git_world: GitWorld, seeded: str) -> None:
    """A subscriber that raises is logged; the push still succeeds and later ones still hear."""

    def broken(event: PushEvent) -> None:
        raise RuntimeError("subscriber bug")

    events: list[PushEvent] = []
    git_world.repos.on_push(broken)
    git_world.repos.on_push(events.append)
    checkout = git_world.clone("acme", "demo", "work")
    new = git_world.commit_file(checkout, "d.txt", "d\n", "D")
    git_world.git("push", "--quiet", "origin", "main", cwd=checkout)
    assert [e.new_sha for e in events] == [new]


def test_git_env_ignores_the_callers_git_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIT_* variables of the caller are dropped and global/system config switched off."""
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    env = git_env()
    assert "GIT_DIR" not in env
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"


def test_large_push_lands(git_world: GitWorld, seeded: str) -> None:
    """A push bigger than git's post buffer (sent chunked) is applied whole."""
    checkout = git_world.clone("acme", "demo", "work")
    (checkout / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    git_world.git("add", "blob.bin", cwd=checkout)
    git_world.git("commit", "--quiet", "-m", "Big", cwd=checkout)
    new = git_world.git("rev-parse", "HEAD", cwd=checkout).stdout.strip()
    git_world.git("push", "--quiet", "origin", "main", cwd=checkout)
    assert git_world.repos.resolve("acme", "demo", "main") == new
    again = git_world.clone("acme", "demo", "again")
    assert (again / "blob.bin").read_bytes() == (checkout / "blob.bin").read_bytes()


def test_concurrent_pushes_each_report_only_their_own_refs(
    git_world: GitWorld, seeded: str
) -> None:
    """Pushes running at the same time fire one event each, for the ref each one updated."""
    events: list[PushEvent] = []
    git_world.repos.on_push(events.append)
    expected = []
    checkouts = []
    for i in range(4):
        checkout = git_world.clone("acme", "demo", f"w{i}")
        sha = git_world.commit_file(checkout, f"f{i}.txt", f"{i}\n", f"F{i}")
        checkouts.append(checkout)
        expected.append(PushEvent("acme", "demo", f"refs/heads/b{i}", ZERO_SHA, sha, PUSHER))
    threads = [
        threading.Thread(
            target=git_world.git,
            args=("push", "--quiet", "origin", f"HEAD:refs/heads/b{i}"),
            kwargs={"cwd": checkout},
        )
        for i, checkout in enumerate(checkouts)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(events, key=lambda e: e.ref) == expected
