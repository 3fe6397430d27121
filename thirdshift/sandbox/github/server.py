"""The GitHub stand-in: a loopback HTTP server PyGithub cannot tell from GitHub Enterprise.

One port serves four things:

- the REST API under ``/api/v3`` (``api_url``) and PyGithub's two draft mutations at
  ``/api/graphql``, with GitHub's rate-limit headers, weak ETags, conditional requests and
  error bodies;
- git's smart HTTP at ``/<owner>/<name>.git`` (basic auth, password = a user's token);
- job log downloads at ``/_downloads/job-logs/<token>`` (where the logs endpoint redirects);
- scenario control under ``/_sandbox/`` (no auth, loopback clients only): users, repositories,
  scripted merge refusals, injected faults, the request record and CI progress.

Every REST and GraphQL answer is handed to ``on_exchange`` as an :class:`Exchange`.

Over 500 lines on purpose: the server's lifecycle, its four routes and the HTTP handler that
dispatches to them read best together; each family of endpoints already lives in a module of
its own (``issues``, ``pulls``, ``reviews``, ``actions``), limits and faults in ``limits``.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import math
import random
import re
import socket
import threading
import time
import urllib.parse
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import jwt

from thirdshift.errors import SandboxError
from thirdshift.sandbox.ci import SimulatedCI
from thirdshift.sandbox.git_http import BareRepos, GitHttpRequest, PushEvent
from thirdshift.sandbox.github.actions import check_run_json
from thirdshift.sandbox.github.actions import register as register_actions
from thirdshift.sandbox.github.api import Backend, Call, Reply, Router, error_reply
from thirdshift.sandbox.github.apps import register as register_apps
from thirdshift.sandbox.github.hooks import register as register_hooks
from thirdshift.sandbox.github.issue_lists import register as register_issue_lists
from thirdshift.sandbox.github.issues import register as register_issues
from thirdshift.sandbox.github.limits import (
    RATE_LIMIT,
    SECONDARY_MESSAGE,
    Exchange,
    Faults,
    RateLimits,
    SecondaryLimits,
    etag,
    etag_matches,
    rate_headers,
)
from thirdshift.sandbox.github.pulls import graphql
from thirdshift.sandbox.github.pulls import register as register_pulls
from thirdshift.sandbox.github.repos import register as register_repos
from thirdshift.sandbox.github.reviews import register as register_reviews
from thirdshift.sandbox.github.shapes import Shapes, Urls
from thirdshift.sandbox.github.state import ROLES, ApiError, App, World, rank, utcnow

__all__ = ["Exchange", "GitHubStandIn"]

log = logging.getLogger(__name__)

API_PREFIX = "/api/v3"
GRAPHQL_PATH = "/api/graphql"
ANONYMOUS_RATE_LIMIT = 60
MAX_JWT_SECONDS = 600 + 30
"""GitHub refuses an App's JSON Web Token that ends more than ten minutes ahead (with a
little leeway for clocks)."""
_GIT_PATH = re.compile(r"^/(?P<owner>[^/]+)/(?P<name>[^/]+)\.git(?P<rest>/.*)?$")
_DOCS = "https://docs.github.com/rest"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class GitHubStandIn:
    """The stand-in's lifecycle: ``start`` binds and serves in a thread, ``stop`` shuts the
    server and the simulated CI down. ``root`` holds the bare repositories and CI checkouts."""

    def __init__(
        self,
        root: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        on_exchange: Callable[[Exchange], None] | None = None,
    ) -> None:
        self.root = root
        self.host = host
        self.port = port
        self.on_exchange = on_exchange
        self.world = World()
        self.git = BareRepos(root / "repos")
        self.git.on_push(self._pushed)
        self.router = Router()
        register_issues(self.router)
        register_issue_lists(self.router)
        register_repos(self.router)
        register_pulls(self.router)
        register_reviews(self.router)
        register_apps(self.router)
        register_actions(self.router)
        register_hooks(self.router)
        self.faults = Faults()
        self.faults_lock = threading.Lock()
        # A test's hook, called with (method, path) before each REST or GraphQL request is
        # answered: for a person's action timed against what thirdshift asks.
        self.before_answer: Callable[[str, str], None] | None = None
        self.rate_limits = RateLimits()
        self.secondary = SecondaryLimits()
        self.requests: deque[dict[str, Any]] = deque(maxlen=5000)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._backend: Backend | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the port and serve in a background thread; start the simulated CI."""
        if self._server is not None:
            return
        try:
            server = ThreadingHTTPServer((self.host, self.port), _Handler)
        except OSError as exc:
            raise SandboxError(
                f"the GitHub stand-in cannot listen on {self.host}:{self.port} ({exc}); "
                "choose another port"
            ) from exc
        server.daemon_threads = True
        server.stand_in = self  # type: ignore[attr-defined]
        self.port = server.server_address[1]
        ci = SimulatedCI(self.git, self.root / "ci")
        self._backend = Backend(self.world, Shapes(self.world, Urls(self.web_url)), self.git, ci)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="github-stand-in", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and stop the CI (cancelling its jobs). Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._backend is not None:
            self._backend.ci.stop()

    def __enter__(self) -> GitHubStandIn:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def web_url(self) -> str:
        """``http://HOST:PORT``: git clone URLs and ``html_url`` pages live under it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def api_url(self) -> str:
        """PyGithub's ``base_url``: ``http://HOST:PORT/api/v3`` (GitHub Enterprise style)."""
        return self.web_url + API_PREFIX

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            raise SandboxError("the GitHub stand-in is not started; call start() first")
        return self._backend

    # -- scenario -------------------------------------------------------------------------

    def add_user(
        self,
        login: str,
        token: str,
        permissions: dict[str, str],
        scopes: tuple[str, ...] | None = ("repo",),
    ) -> None:
        """Register ``login`` authenticating with ``token`` and holding roles per repo; the
        token is a classic one with ``scopes`` (None: a fine-grained one)."""
        try:
            self.world.add_user(login, token, permissions, scopes)
        except ValueError as exc:
            raise SandboxError(f"cannot add user {login}: {exc}") from exc

    def add_repo(self, owner: str, name: str, source_dir: Path, checks: dict[str, str]) -> str:
        """Create ``owner/name`` with ``source_dir`` as its first commit on main, declare its
        checks and run them on that commit. Returns the commit's sha."""
        backend = self.backend
        with self.world.lock:
            if (owner, name) in self.world.repos:
                raise SandboxError(f"repository {owner}/{name} already exists in the stand-in")
            sha = self.git.create(owner, name, source_dir)
            self.world.add_repo(owner, name)
        backend.ci.set_checks(owner, name, checks)
        backend.ci.trigger(owner, name, sha, "main")
        return sha

    def add_app(
        self, slug: str, public_key: str, repositories: list[str], token_seconds: float = 3600
    ) -> int:
        """Register a GitHub App (its PEM public key) installed where ``repositories`` are;
        its installation tokens last ``token_seconds``. Returns the App's id."""
        app = self.world.add_app(slug, public_key, repositories, timedelta(seconds=token_seconds))
        return app.id

    def fail_next_merges(self, full_name: str, count: int, status: int, message: str) -> None:
        """Make the next ``count`` merges of ``owner/name`` fail with ``status`` and
        ``message`` (a policy refusal, say)."""
        owner, _, name = full_name.partition("/")
        with self.world.lock:
            repo = self.world.repos.get((owner, name))
            if repo is None:
                raise SandboxError(f"repository {full_name} does not exist in the stand-in")
            repo.merge_failures.extend([(status, message)] * count)

    def set_faults(self, faults: Faults) -> None:
        with self.faults_lock:
            self.faults = faults

    def limit_for(self, seconds: float) -> None:
        """Answer every API request with GitHub's rate-limit 403 for the next ``seconds``, its
        ``X-RateLimit-Reset`` naming the end of that window; then serve again. The other
        injected faults stay as they are."""
        with self.faults_lock:
            self.faults.rate_limited_until = time.time() + seconds

    def _pushed(self, event: PushEvent) -> None:
        with self.world.lock:
            repo = self.world.repos.get((event.owner, event.name))
            if repo is not None:
                repo.pushed_at = utcnow()

    # -- the REST API ---------------------------------------------------------------------

    def serve_api(self, request: _Request) -> tuple[int, dict[str, str], bytes]:
        """Answer one REST or GraphQL request with rate limits, faults and ETags applied."""
        hook = self.before_answer
        if hook is not None:
            hook(request.method, request.path)
        is_graphql = request.path == GRAPHQL_PATH
        resource = "graphql" if is_graphql else "core"
        with self.faults_lock:
            delay = self.faults.delay_ms
            fault = self.faults.draw()
            retry_after = self.faults.retry_after
            until = self.faults.rate_limited_until
            limited = self.faults.limited(time.time())
        if delay:
            time.sleep(delay / 1000)
        login, who, bad_token, app = self._authenticate(request.headers.get("authorization"))
        # An App signing its own requests has a budget of its own, as a user has.
        limit = RATE_LIMIT if login or app else ANONYMOUS_RATE_LIMIT
        window = self.rate_limits.window(who, resource, limit)
        path = request.path.removeprefix(API_PREFIX) or "/"
        base: dict[str, str] = {
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
        }
        scopes = self.world.users[login].scopes if login else None
        if scopes is not None:  # a classic token's; GitHub names no fine-grained token's
            base["X-OAuth-Scopes"] = ", ".join(scopes)
        if bad_token:
            reply = error_reply(ApiError(401, "Bad credentials"))
        elif path == "/rate_limit" and request.method == "GET" and not is_graphql:
            reply = Reply(200, self._rate_limit_body(who, limit))
        elif (wait := self.secondary.admit(who, _creates(request, is_graphql))) is not None:
            reply = error_reply(
                ApiError(403, SECONDARY_MESSAGE.format(request_id=base["X-GitHub-Request-Id"]))
            )
            reply.body["documentation_url"] = (
                "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                "#about-secondary-rate-limits"
            )
            headers = base | rate_headers(window, resource) | {"Retry-After": str(wait)}
            return self._finish(reply, headers, request)
        elif fault == 403 or limited or window.used >= window.limit:
            uid = self.world.users[login].id if login else 0
            reply = error_reply(
                ApiError(
                    403,
                    f"API rate limit exceeded for user ID {uid}. If you reach out to GitHub "
                    "Support for help, please include the request ID "
                    f"{base['X-GitHub-Request-Id']}",
                )
            )
            reply.body["documentation_url"] = (
                "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
            )
            headers = base | rate_headers(window, resource, 0)
            if limited:
                # A scripted window: its end is the reset; the hourly budget is left alone.
                headers["X-RateLimit-Reset"] = str(math.ceil(until))
            else:
                self.rate_limits.spend(who, resource, limit)
            return self._finish(reply, headers, request)
        elif fault is not None:
            reply = error_reply(ApiError(fault, "Server Error" if fault == 500 else "Bad Gateway"))
            if retry_after is not None:
                reply.headers["Retry-After"] = str(retry_after)
        else:
            call = Call(
                self.backend, request.method, path, request.query, request.body, login, app=app
            )
            reply = graphql(call) if is_graphql else self.router.dispatch(call)
            if not is_graphql and request.method != "GET" and reply.status < 400:
                with self.faults_lock:
                    lost = self.faults.draw_lost()
                if lost:  # the write is made; only its answer goes missing
                    reply = error_reply(ApiError(502, "Bad Gateway"))
        body = self._encode(reply)
        if (
            request.method == "GET"
            and reply.status == 200
            and etag_matches(request.headers.get("if-none-match"), etag(body))
        ):
            headers = base | rate_headers(window, resource) | {"ETag": etag(body)}
            return self._finish(Reply(304, None), headers, request, b"")
        if path != "/rate_limit" and not bad_token:
            self.rate_limits.spend(who, resource, limit)
        headers = base | rate_headers(window, resource) | reply.headers
        if request.method == "GET" and reply.status == 200:
            headers["ETag"] = etag(body)
            headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
        return self._finish(reply, headers, request, body)

    def _finish(
        self,
        reply: Reply,
        headers: dict[str, str],
        request: _Request,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        if body is None:
            body = self._encode(reply)
        if body:
            headers["Content-Type"] = "application/json; charset=utf-8"
        exchange = Exchange(
            method=request.method,
            path=request.path,
            query=request.raw_query,
            request_headers=tuple(request.headers.items()),
            request_body=request.body,
            status=reply.status,
            response_headers=tuple(headers.items()),
            response_body=body,
        )
        login, who, _, _ = self._authenticate(request.headers.get("authorization"))
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": request.raw_query,
                "status": reply.status,
                "login": login or (who if who.startswith("app:") else None),
            }
        )
        if self.on_exchange is not None:
            try:
                self.on_exchange(exchange)
            except Exception:
                log.exception("on_exchange hook failed for %s %s", request.method, request.path)
        return reply.status, headers, body

    @staticmethod
    def _encode(reply: Reply) -> bytes:
        if reply.body is None:
            return b""
        if isinstance(reply.body, bytes):
            return reply.body
        return json.dumps(reply.body, separators=(",", ":")).encode()

    def _authenticate(self, header: str | None) -> tuple[str | None, str, bool, App | None]:
        """(login, rate-limit identity, whether a token was given and is wrong, the GitHub App
        whose JSON Web Token it is)."""
        if not header:
            return None, "anonymous", False, None
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() not in ("token", "bearer") or not token:
            return None, "anonymous", True, None
        if scheme.lower() == "bearer" and token.count(".") == 2:
            app = self._signed_by_app(token)
            if app is None:
                return None, "anonymous", True, None
            return None, f"app:{app.id}", False, app
        user = self.world.user_by_token(token)
        if user is None:
            return None, "anonymous", True, None
        return user.login, user.login, False, None

    def _signed_by_app(self, token: str) -> App | None:
        """The App that signed this JSON Web Token, when its signature holds, it is current,
        and it lasts at most ten minutes (GitHub's rules); else None."""
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
            app = self.world.apps.get(int(claims["iss"]))
            if app is None:
                return None
            checked = jwt.decode(
                token,
                app.public_key,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"]},
            )
        except (jwt.PyJWTError, KeyError, ValueError, TypeError):
            return None
        if float(checked["exp"]) - time.time() > MAX_JWT_SECONDS:
            return None
        return app

    def _rate_limit_body(self, who: str, limit: int) -> dict[str, Any]:
        def entry(resource: str, size: int) -> dict[str, int]:
            window = self.rate_limits.window(who, resource, size)
            return {
                "limit": window.limit,
                "used": window.used,
                "remaining": max(window.limit - window.used, 0),
                "reset": window.reset,
            }

        core = entry("core", limit)
        return {
            "resources": {
                "core": core,
                "search": entry("search", 30),
                "graphql": entry("graphql", limit),
            },
            "rate": core,
        }

    # -- git, downloads and scenario control ----------------------------------------------

    def serve_git(self, request: _Request, owner: str, name: str, rest: str) -> _Raw:
        """Smart HTTP with basic auth: read to fetch, write to push."""
        challenge = {"WWW-Authenticate": 'Basic realm="GitHub"', "Content-Type": "text/plain"}
        header = request.headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        login = None
        if scheme.lower() == "basic":
            try:
                _, _, token = base64.b64decode(encoded).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                token = ""
            user = self.world.user_by_token(token) if token else None
            login = user.login if user else None
        if login is None:
            return 401, challenge, b"Invalid username or token.\n"
        repo = self.world.repos.get((owner, name))
        role = self.world.role(login, repo) if repo else None
        if repo is None or rank(role) < 0:
            return 404, {"Content-Type": "text/plain"}, b"Repository not found.\n"
        pushing = rest.rstrip("/") == "/git-receive-pack" or (
            request.query.get("service") == "git-receive-pack"
        )
        if pushing and rank(role) < rank("write"):
            message = f"Permission to {owner}/{name}.git denied to {login}.\n"
            return 403, {"Content-Type": "text/plain"}, message.encode()
        answer = self.git.serve_git(
            GitHttpRequest(
                method=request.method,
                owner=owner,
                name=name,
                path_info=rest,
                query_string=request.raw_query,
                content_type=request.headers.get("content-type", ""),
                body=request.body,
                remote_user=login,
                git_protocol=request.headers.get("git-protocol", ""),
                content_encoding=request.headers.get("content-encoding", ""),
            )
        )
        return answer.status, dict(answer.headers), answer.body

    def serve_download(self, token: str) -> _Raw:
        backend = self.backend
        with backend.log_lock:
            target = backend.log_links.get(token)
        text = backend.ci.job_log(*target) if target else None
        if text is None:
            return 404, {"Content-Type": "text/plain"}, b"Not Found\n"
        return 200, {"Content-Type": "text/plain; charset=utf-8"}, text.encode()

    def serve_control(self, request: _Request) -> _Raw:
        """``/_sandbox/``: scenario set-up and inspection, JSON in and out."""
        try:
            status, body = self._control(request)
        except (SandboxError, ValueError, KeyError, TypeError) as exc:
            status, body = 400, {"message": str(exc)}
        data = b"" if body is None else json.dumps(body).encode()
        return status, {"Content-Type": "application/json"}, data

    def _control(self, request: _Request) -> tuple[int, Any]:
        path = request.path.removeprefix("/_sandbox")
        data: Any = json.loads(request.body) if request.body.strip() else {}
        if request.method == "POST" and path == "/users":
            permissions = data.get("permissions", {})
            unknown = [r for r in permissions.values() if r not in ROLES]
            if unknown:
                raise ValueError(f"unknown role {unknown[0]!r}; use one of {', '.join(ROLES)}")
            scopes = data.get("scopes", ["repo"])
            self.add_user(
                str(data["login"]),
                str(data["token"]),
                dict(permissions),
                None if scopes is None else tuple(str(scope) for scope in scopes),
            )
            return 201, {"login": data["login"], "id": self.world.users[data["login"]].id}
        if request.method == "POST" and path == "/apps":
            repositories = [str(r) for r in data.get("repositories", [])]
            app_id = self.add_app(
                str(data["slug"]),
                str(data["public_key"]),
                repositories,
                float(data.get("token_seconds", 3600)),
            )
            return 201, {"id": app_id, "slug": data["slug"]}
        if request.method == "POST" and path == "/repos":
            owner, name = str(data["owner"]), str(data["name"])
            sha = self.add_repo(owner, name, Path(data["source_dir"]), dict(data.get("checks", {})))
            return 201, {
                "full_name": f"{owner}/{name}",
                "sha": sha,
                "clone_url": f"{self.web_url}/{owner}/{name}.git",
            }
        if request.method == "POST" and path == "/merge-failures":
            self.fail_next_merges(
                str(data["repo"]),
                int(data.get("count", 1)),
                int(data.get("status", 405)),
                str(data.get("message", "Pull Request is not mergeable")),
            )
            return 201, {"repo": data["repo"], "count": int(data.get("count", 1))}
        if request.method == "POST" and path == "/faults":
            self.set_faults(
                Faults(
                    error_rate=float(data.get("error_rate", 0.0)),
                    statuses=tuple(int(s) for s in data.get("statuses", [500])) or (500,),
                    rate_limit_403=bool(data.get("rate_limit_403", False)),
                    delay_ms=int(data.get("delay_ms", 0)),
                    count=int(data["count"]) if data.get("count") is not None else None,
                    rng=random.Random(data.get("seed")),  # noqa: S311 - fault injection, not crypto
                    retry_after=(
                        int(data["retry_after"]) if data.get("retry_after") is not None else None
                    ),
                    lost_answers=float(data.get("lost_answers", 0.0)),
                )
            )
            if data.get("rate_limited_for_seconds") is not None:
                self.limit_for(float(data["rate_limited_for_seconds"]))
            return 201, {"faults": "set"}
        if request.method == "DELETE" and path == "/faults":
            self.set_faults(Faults())
            return 204, None
        if request.method == "GET" and path == "/requests":
            return 200, list(self.requests)
        found = re.match(r"^/checks/([^/]+)/([^/]+)/([0-9a-f]{40})$", path)
        if request.method == "GET" and found:
            return 200, self._checks(*found.groups())
        return 404, {"message": f"no scenario control at {request.method} {request.path}"}

    def _checks(self, owner: str, name: str, sha: str) -> dict[str, Any]:
        backend = self.backend
        with self.world.lock:
            repo = self.world.repos.get((owner, name))
            if repo is None:
                raise SandboxError(f"repository {owner}/{name} does not exist in the stand-in")
            call = Call(backend, "GET", "", {}, b"", None)
            records = backend.ci.check_runs(owner, name, sha)
            return {
                "idle": backend.ci.idle(owner, name, sha),
                "check_runs": [check_run_json(call, repo, r) for r in records],
            }


@dataclass
class _Request:
    method: str
    path: str
    raw_query: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


_Raw = tuple[int, dict[str, str], bytes]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "GitHub.com"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        stand_in: GitHubStandIn = self.server.stand_in  # type: ignore[attr-defined]
        parsed = urllib.parse.urlsplit(self.path)
        request = _Request(
            method=self.command,
            path=parsed.path,
            raw_query=parsed.query,
            query=dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self._read_body(),
        )
        try:
            result = self._route(stand_in, request)
        except Exception:
            log.exception("the GitHub stand-in failed on %s %s", self.command, self.path)
            result = (
                500,
                {"Content-Type": "application/json"},
                json.dumps({"message": "Server Error", "documentation_url": _DOCS}).encode(),
            )
        status, headers, body = result
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _route(self, stand_in: GitHubStandIn, request: _Request) -> _Raw:
        path = request.path
        if path.startswith(API_PREFIX + "/") or path in (API_PREFIX, GRAPHQL_PATH):
            return stand_in.serve_api(request)
        if path.startswith("/_sandbox/"):
            if not _is_loopback(self.client_address[0]):
                return 403, {"Content-Type": "text/plain"}, b"Loopback clients only.\n"
            return stand_in.serve_control(request)
        if path.startswith("/_downloads/job-logs/"):
            return stand_in.serve_download(path.rsplit("/", 1)[1])
        found = _GIT_PATH.match(path)
        if found:
            return stand_in.serve_git(request, found["owner"], found["name"], found["rest"] or "/")
        return 404, {"Content-Type": "text/plain"}, b"Not Found\n"


def _creates(request: _Request, is_graphql: bool) -> bool:
    """Whether GitHub counts the request as content-creating: a REST write, or a GraphQL
    mutation (a query is a POST that creates nothing)."""
    if is_graphql:
        return b"mutation" in request.body
    return request.method not in ("GET", "HEAD")
