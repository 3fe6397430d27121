"""The status page's Starlette application: read-only, rendered on the server with Jinja2.

Routes: ``/`` (the page), ``/live`` (the part of it that changes, which the page fetches every
few seconds and puts in place), ``/api/status`` (the JSON behind it), ``/runs/<id>`` (a Run's
own page) and ``/runs/<id>/sessions/<session id>/log`` (a Session log to download),
``/static/<name>`` (the charting library and the Run page's script), ``/healthz``, and with a
``WebhookInbox`` ``POST /webhook`` (GitHub's deliveries). Every route but ``/healthz`` and
``/webhook`` asks for the token, on loopback too (the daemon's agents run untrusted code on
this machine): an ``Authorization: Bearer`` header, or ``?token=`` once, which sets a cookie
for a browser. ``/webhook`` asks instead for GitHub's signature made with ``webhook_secret``.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from thirdshift.errors import ConfigError
from thirdshift.web.charts import DAYS, ChartSource
from thirdshift.web.page import Page, PageSource
from thirdshift.web.run_page import LOG_TYPE
from thirdshift.web.webhook import (
    BODY_SECONDS,
    MAX_DELIVERY_BYTES,
    DeliveryRefused,
    WebhookInbox,
)

WEBHOOK_PATH = "/webhook"

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
"""What the page's scripts need, served from the package (the page works with no network):
Chart.js, copied from the npm package ``package.json`` pins."""
_STATIC_TYPES = {".js": "text/javascript", ".md": "text/plain"}
COOKIE = "thirdshift_status"
REFRESH_SECONDS = 3
RUN_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""A Run's page shows what agents wrote: its scripts are the package's own files only, so
no text on it could ever run even if it escaped its escaping."""


def _environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"])
    )
    environment.filters["clock"] = _clock
    environment.filters["ago"] = _ago
    return environment


def _clock(moment: Any) -> str:
    if not isinstance(moment, datetime):
        return ""
    return moment.astimezone(UTC).strftime("%H:%M:%S UTC")


def _ago(moment: Any) -> str:
    if not isinstance(moment, datetime):
        return ""
    seconds = int((datetime.now(UTC) - moment).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m ago"


class _TokenCheck(BaseHTTPMiddleware):
    def __init__(self, app: Any, token: str, port: int, open_paths: frozenset[str]) -> None:
        super().__init__(app)
        self._token = token
        self._open = open_paths
        # Cookies are kept per host, not per port: each page has a cookie of its own, and the
        # cookie holds a value derived from the token, never the token, so another service on
        # this host that receives it learns nothing it can use elsewhere.
        self._cookie = f"{COOKIE}_{port}"
        self._cookie_value = hmac.new(
            token.encode(), b"thirdshift status page", "sha256"
        ).hexdigest()

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path in self._open:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and _same(given, self._token):
            # Once, from a link: a browser keeps the cookie, and the token leaves the address.
            # Relative, and never a scheme or a host: the page may be served under a prefix
            # (public_url behind a proxy), which an absolute path would drop.
            response = RedirectResponse("./" + request.url.path.rsplit("/", 1)[-1], status_code=303)
            response.set_cookie(self._cookie, self._cookie_value, httponly=True, samesite="strict")
            return response
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        cookie = request.cookies.get(self._cookie)
        if (bearer is not None and _same(bearer, self._token)) or (
            cookie is not None and _same(cookie, self._cookie_value)
        ):
            return await call_next(request)
        return Response(
            "a token is required: open the page once with ?token=<http_token>, or send "
            "Authorization: Bearer <http_token>\n",
            status_code=401,
            media_type="text/plain",
        )


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def make_app(
    source: PageSource,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = 0,
    also_hosts: Iterable[str] = (),
    inbox: WebhookInbox | None = None,
    body_seconds: float = BODY_SECONDS,
    charts: ChartSource | None = None,
) -> Starlette:
    """The application over ``source`` as served on ``host:port``; ``token`` is asked for on
    every route but ``/healthz``. Requests must also name this host, a loopback name or one of
    ``also_hosts`` (the machine's own names and addresses on a wildcard bind, and
    ``http_hosts``): a browser that visits a domain rebound to 127.0.0.1 must not even reach the
    token check. With ``inbox``, GitHub's webhook deliveries are taken at ``POST /webhook``;
    with ``charts``, the page ends with them."""
    if not token:
        # An empty token would let ``?token=`` in: the page is never served open.
        raise ConfigError("the status page needs a token; set http_token")
    environment = _environment()

    def render(name: str, page: Page, **more: Any) -> HTMLResponse:
        html = environment.get_template(name).render(page=page, refresh=REFRESH_SECONDS, **more)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    def index(request: Request) -> Response:
        drawn = charts.charts() if charts is not None else None
        return render("index.html", source.page(), charts=drawn, days=DAYS)

    def live(request: Request) -> Response:
        return render("live.html", source.page())

    def status(request: Request) -> Response:
        return JSONResponse(source.page().json(), headers={"Cache-Control": "no-store"})

    def healthz(request: Request) -> Response:
        return Response("ok\n", media_type="text/plain")

    def run(request: Request) -> Response:
        page = source.run_page(request.path_params["run_id"])
        html = environment.get_template("run.html").render(page=page)
        headers = {"Cache-Control": "no-store", "Content-Security-Policy": RUN_PAGE_POLICY}
        return HTMLResponse(html, status_code=page.status, headers=headers)

    def session_log(request: Request) -> Response:
        log = source.session_log(request.path_params["run_id"], request.path_params["session_id"])
        if log.lines is None:
            return Response(f"{log.problem}\n", log.status, media_type="text/plain")
        headers = {
            "Content-Disposition": f'attachment; filename="{log.name}"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        }
        return StreamingResponse(log.lines, media_type=LOG_TYPE, headers=headers)

    served = {path.name: path for path in STATIC.iterdir() if path.suffix in _STATIC_TYPES}

    def static(request: Request) -> Response:
        # Only the package's own files, by name: a path never reaches the file system.
        path = served.get(request.path_params["name"])
        if path is None:
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(
            path.read_bytes(),
            media_type=_STATIC_TYPES[path.suffix],
            headers={"Cache-Control": "private, max-age=86400"},
        )

    routes = [
        Route("/", index),
        Route("/live", live),
        Route("/api/status", status),
        Route("/healthz", healthz),
        Route("/runs/{run_id:int}", run),
        Route("/runs/{run_id:int}/sessions/{session_id:int}/log", session_log),
        Route("/static/{name}", static),
    ]
    open_paths = {"/healthz"}
    if inbox is not None:
        routes.append(Route(WEBHOOK_PATH, _webhook_endpoint(inbox, body_seconds), methods=["POST"]))
        open_paths.add(WEBHOOK_PATH)
    named = {"localhost", "127.0.0.1", "::1", host, *also_hosts}
    # An IPv6 address stands in a Host header in brackets.
    hosts = sorted({*named, *(f"[{name}]" for name in named if ":" in name)})
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
        Middleware(_TokenCheck, token=token, port=port, open_paths=frozenset(open_paths)),
    ]
    return Starlette(routes=routes, middleware=middleware)


def _webhook_endpoint(inbox: WebhookInbox, body_seconds: float) -> Any:
    """``POST /webhook``: the body read up to MAX_DELIVERY_BYTES within ``body_seconds`` (a
    longer one is refused unread, a slower one cut off), then checked and handed on by
    ``inbox``, off the event loop. The answer comes at once; the poll it asks for runs
    afterwards on the daemon's scheduler."""

    async def webhook(request: Request) -> Response:
        try:
            body = await _capped_body(request)
            delivery = await run_in_threadpool(inbox.receive, request.headers, body)
        except DeliveryRefused as refusal:
            return Response(f"refused: {refusal.reason}\n", refusal.status, media_type="text/plain")
        return Response(f"accepted {delivery.what}\n", 202, media_type="text/plain")

    async def _capped_body(request: Request) -> bytes:
        length = request.headers.get("content-length", "")
        over = DeliveryRefused(413, f"longer than {MAX_DELIVERY_BYTES} bytes", "too long")
        if length.isdigit() and int(length) > MAX_DELIVERY_BYTES:
            await run_in_threadpool(inbox.refuse, over)
            raise over
        body = bytearray()
        try:
            async with asyncio.timeout(body_seconds):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > MAX_DELIVERY_BYTES:
                        await run_in_threadpool(inbox.refuse, over)
                        raise over
        except TimeoutError:
            slow = DeliveryRefused(408, f"its body took over {body_seconds:g}s", "too slow")
            await run_in_threadpool(inbox.refuse, slow)
            raise slow from None
        return bytes(body)

    return webhook
