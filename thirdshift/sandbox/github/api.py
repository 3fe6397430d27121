"""The GitHub stand-in's REST core: one parsed call in, one reply out, and the router between.

Route modules (``sandbox_github_issues``, ``sandbox_github_pulls``) register handlers on a
:class:`Router`; a handler takes a :class:`Call` and returns a :class:`Reply` or raises
:class:`ApiError`. Nothing here knows about sockets, rate limits or faults; the HTTP layer in
``sandbox_github`` does.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thirdshift.sandbox.github.shapes import Json, Shapes, Urls
from thirdshift.sandbox.github.state import ApiError, App, Repo, World, not_found, rank

if TYPE_CHECKING:
    from thirdshift.sandbox.ci import SimulatedCI
    from thirdshift.sandbox.git_http import BareRepos

DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


@dataclass
class Reply:
    """A REST answer: ``body`` is JSON-able (None for no body) or raw bytes."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Backend:
    """What handlers work on: the world, its renderer, the git repositories and the CI."""

    world: World
    shapes: Shapes
    git: BareRepos
    ci: SimulatedCI
    log_links: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    log_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def urls(self) -> Urls:
        return self.shapes.urls

    def log_link(self, owner: str, name: str, job_id: int) -> str:
        """A fresh unauthenticated download URL for a job's log, as GitHub hands out."""
        token = secrets.token_urlsafe(16)
        with self.log_lock:
            self.log_links[token] = (owner, name, job_id)
        return f"{self.urls.web}/_downloads/job-logs/{token}"


@dataclass
class Call:
    """One REST request, authenticated, with the path parameters its route captured."""

    backend: Backend
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    login: str | None
    params: dict[str, str] = field(default_factory=dict)
    app: App | None = None  # the GitHub App whose JSON Web Token authenticated the call

    @property
    def world(self) -> World:
        return self.backend.world

    @property
    def shapes(self) -> Shapes:
        return self.backend.shapes

    def json(self) -> dict[str, Any]:
        """The request body as a JSON object; 400 ``Problems parsing JSON`` otherwise."""
        if not self.body.strip():
            return {}
        try:
            data = json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(400, "Problems parsing JSON") from exc
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        return data

    def repo(self, need: str = "read") -> Repo:
        """The repository named by the path, when the caller holds at least ``need``.

        Unknown or unreadable repositories are 404 (GitHub hides private ones); a reader
        asking for more is refused with 403.
        """
        repo = self.world.visible_repo(self.login, self.params["owner"], self.params["repo"])
        if rank(self.world.role(self.login, repo)) < rank(need):
            raise ApiError(403, f"Must have {need} access to repository.")
        return repo

    def role(self, repo: Repo) -> str | None:
        return self.world.role(self.login, repo)

    def number(self, key: str = "number") -> int:
        try:
            return int(self.params[key])
        except ValueError:
            raise not_found() from None

    def int_query(self, key: str, default: int) -> int:
        raw = self.query.get(key)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise ApiError(400, f"Invalid value for parameter '{key}'") from None

    def page(self, items: list[Json], wrap: str | None = None) -> Reply:
        """One page of ``items`` (``per_page``/``page``) with GitHub's ``Link`` header; with
        ``wrap``, the page is ``{"total_count": N, wrap: [...]}``."""
        per_page = min(max(self.int_query("per_page", DEFAULT_PER_PAGE), 1), MAX_PER_PAGE)
        number = max(self.int_query("page", 1), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(number - 1) * per_page : number * per_page]
        rels: list[tuple[str, int]] = []
        if number > 1:
            rels.append(("prev", min(number - 1, last)))
        if number < last:
            rels += [("next", number + 1), ("last", last)]
        if number > 1:
            rels.append(("first", 1))
        headers = {}
        if rels:
            headers["Link"] = ", ".join(f'<{self._page_url(n)}>; rel="{rel}"' for rel, n in rels)
        body: Any = {"total_count": len(items), wrap: chunk} if wrap else chunk
        return Reply(200, body, headers)

    def _page_url(self, number: int) -> str:
        query = {k: v for k, v in self.query.items() if k != "page"}
        query["page"] = str(number)
        return f"{self.backend.urls.api}{self.path}?{urllib.parse.urlencode(query)}"


Handler = Callable[[Call], Reply]


class Router:
    """Method plus path pattern to handler. Patterns use ``{name}`` for one segment and
    ``{name+}`` for the rest of the path (git refs with slashes)."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        regex = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", pattern)
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", regex)
        self._routes.append((method, re.compile(f"^{regex}$"), handler))

    def route(self, method: str, path: str) -> tuple[Handler, dict[str, str]] | None:
        for verb, regex, handler in self._routes:
            found = regex.match(path)
            if verb == method and found:
                params = {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
                return handler, params
        return None

    def dispatch(self, call: Call) -> Reply:
        """Run the handler for ``call``; errors become GitHub's JSON error replies."""
        found = self.route(call.method, call.path)
        try:
            if found is None:
                raise not_found()
            handler, call.params = found
            with call.world.lock:
                return handler(call)
        except ApiError as exc:
            return error_reply(exc)


def error_reply(exc: ApiError) -> Reply:
    """GitHub's error body: ``message``, ``documentation_url``, ``status`` and maybe ``errors``."""
    body: dict[str, Any] = {
        "message": exc.message,
        "documentation_url": "https://docs.github.com/rest",
        "status": str(exc.status),
    }
    if exc.errors is not None:
        body["errors"] = exc.errors
    return Reply(exc.status, body, dict(exc.headers))
