"""The model gateway: the model key stays outside the sandbox.

A sealed session's CLI is pointed at a plain-HTTP address on its own egress proxy
(``GATEWAY_URL``, the proxy's port on the namespace's loopback) with a stand-in key
(``STAND_IN_KEY``) where its real key would go. The proxy hands every request made to that
address (origin form, or absolute form naming it) to the session's ``ModelGateway``, which
picks the ``Route`` by the path's first segment, forwards exactly one request to the provider
the operator configured (TLS for ``https``), puts the real credential where the stand-in key
was sent, and drops any other credential the agent sent. So the sandbox's environment, files
and the CLI's own configuration hold no credential a hostile session could read and push.

Each Harness says how its CLI is pointed at the gateway (``Harness.behind_gateway``); the
rules here are the ones every Harness shares. See adr/0038.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses.http_framing import (
    CHUNK,
    BadRequest,
    RequestHead,
    answer,
    body_bytes,
    body_length,
    header_fields,
)

GATEWAY_HOST = "127.0.0.1"
GATEWAY_PORT = 3128
"""The egress proxy's port on the namespace's loopback (``agent_sandbox.PROXY_PORT``): a request
made to it directly, not through it, is a model request."""
GATEWAY_URL = f"http://{GATEWAY_HOST}:{GATEWAY_PORT}"
STAND_IN_KEY = "thirdshift-model-gateway-adds-the-key"
"""What a CLI holds where its key would be: no secret; the gateway swaps it for the real one."""
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})
"""Headers a model provider reads a credential from. One carrying the stand-in key gets the real
one in its place; any other the agent sends is dropped."""
_HOP_BY_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "upgrade",
        "trailer",
    }
)
_BODY_LIMIT = 64 * 1024 * 1024
"""A request body larger than this is no model request (the gateway answers 413)."""
_CONNECT_SECONDS = 10.0
_IDLE_SECONDS = 600.0
"""No byte from the client's body or the provider's answer for this long: the request is let
go (a model may think for minutes before its first byte; the session's own watchdogs decide)."""


class ModelKeyInside(ThirdshiftError):
    """The Harness's credential cannot be kept outside the sandbox (a login file the CLI
    refreshes itself, a provider it cannot be pointed away from); the message says which and the
    fix."""


@dataclass(frozen=True)
class Route:
    """Requests under ``/<name>/`` go to ``upstream`` (a base URL: scheme, host, port, path),
    with ``key`` in place of the stand-in key."""

    name: str
    upstream: str
    key: str

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ThirdshiftError(
                f"the model provider's base URL {self.upstream!r} is not an http(s) URL; fix the "
                "base URL setting of the Harness"
            )
        if not self.key or any(c in self.key for c in "\r\n\0") or self.key != self.key.strip():
            raise ThirdshiftError(
                f"the model key for {parts.hostname} holds a line break or is empty; set it again"
            )

    @property
    def url(self) -> str:
        """The base URL the CLI is given in the sandbox."""
        return f"{GATEWAY_URL}/{self.name}"


@dataclass(frozen=True)
class GatewayPlan:
    """How one Harness's CLI runs with its key outside: the environment it gets in place of the
    provider variables it would have had (the base URLs pointed at the gateway, stand-in keys),
    the argv items to replace (a Codex provider given on the command line), the variables to
    leave out, and the routes the gateway serves."""

    routes: tuple[Route, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    dropped: frozenset[str] = frozenset()
    args: Mapping[str, str] = field(default_factory=dict)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with the plan's variables set and the dropped ones gone."""
        kept = {name: value for name, value in env.items() if name not in self.dropped}
        kept.update(self.env)
        return kept

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [self.args.get(item, item) for item in argv]


def route_for(name: str, base_url: str, default: str, key: str) -> Route:
    """A route named ``name`` to ``base_url`` (``default`` when it is empty), with ``key``."""
    return Route(name=name, upstream=(base_url or default).rstrip("/"), key=key)


def is_gateway_authority(authority: str) -> bool:
    """Whether an absolute-form request's ``host:port`` is the gateway's own address."""
    return authority.lower() in (f"{GATEWAY_HOST}:{GATEWAY_PORT}", f"localhost:{GATEWAY_PORT}")


class ModelGateway:
    """Forwards a session's model requests to its routes, one request a connection."""

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        connect_seconds: float = _CONNECT_SECONDS,
        idle_seconds: float = _IDLE_SECONDS,
    ) -> None:
        self._routes = {route.name: route for route in routes}
        self._connect_seconds = connect_seconds
        self._idle_seconds = idle_seconds
        self.forwarded = 0

    async def forward(
        self,
        method: str,
        target: str,
        version: str,
        header_lines: Sequence[str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Forward the request whose head was read (``target`` in origin form), then relay the
        provider's answer until it closes. What the client sends after the request is dropped.
        ``BadRequest`` for a head or body that cannot be framed one way only."""
        if not target.startswith("/"):
            await answer(writer, 400, "the model gateway takes a path")
            return
        name, _, rest = target[1:].partition("/")
        route = self._routes.get(name.partition("?")[0])
        if route is None:
            await answer(writer, 404, f"the model gateway has no route {name!r}")
            return
        head = RequestHead(method, target, version, header_fields(header_lines))
        length = body_length(head)
        if length is not None and length > _BODY_LIMIT:
            raise BadRequest(413, "a model request over 64 MiB")
        upstream = urlsplit(route.upstream)
        host = upstream.hostname or ""
        secure = upstream.scheme == "https"
        port = upstream.port or (443 if secure else 80)
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host,
                    port,
                    ssl=ssl.create_default_context() if secure else None,
                    server_hostname=host if secure else None,
                    limit=CHUNK,
                ),
                self._connect_seconds,
            )
        except (OSError, TimeoutError, ssl.SSLError) as error:
            reason = (
                error.strerror if isinstance(error, OSError) and error.strerror else "no answer"
            )
            await answer(
                writer, 502, f"the model provider {host}:{port} cannot be reached ({reason})"
            )
            return
        try:
            path = upstream.path.rstrip("/") + "/" + rest
            authority = host if upstream.port is None else f"{host}:{upstream.port}"
            lines = [f"{method} {path} {version}", f"Host: {authority}"]
            lines += [f"{field}: {value}" for field, value in _outbound(head.fields, route.key)]
            lines.append("Connection: close")
            up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            sent = 0
            async for data in body_bytes(reader, length, idle_seconds=self._idle_seconds):
                sent += len(data)
                if sent > _BODY_LIMIT:
                    raise BadRequest(413, "a model request over 64 MiB")
                up_writer.write(data)
                await up_writer.drain()
            self.forwarded += 1
            while chunk := await asyncio.wait_for(up_reader.read(CHUNK), self._idle_seconds):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()


def _outbound(headers: Sequence[tuple[str, str]], key: str) -> list[tuple[str, str]]:
    """The headers sent on: hop-by-hop ones gone; a credential header carrying the stand-in key
    carries ``key`` instead; any other credential header dropped."""
    sent: list[tuple[str, str]] = []
    for name, value in headers:
        lower = name.lower()
        if lower in _HOP_BY_HOP:
            continue
        if lower in CREDENTIAL_HEADERS:
            # Only the stand-in as a CLI sends it, alone or as a bearer token: the real key is
            # never spliced into text the agent chose.
            scheme, _, rest = value.strip().rpartition(" ")
            if rest != STAND_IN_KEY or scheme.lower() not in ("", "bearer"):
                continue
            value = f"{scheme} {key}" if scheme else key
        sent.append((name, value))
    return sent


def variables_behind_gateway(
    env: Mapping[str, str],
    *,
    name: str,
    base_url_variable: str,
    default_upstream: str,
    key_variables: Sequence[str],
    login: str,
) -> GatewayPlan:
    """The plan of a CLI that reads its provider from variables: the first of ``key_variables``
    set holds the key, ``base_url_variable`` the provider (``default_upstream`` when unset).
    With no key set, ``ModelKeyInside`` says ``login`` (what the CLI would use instead)."""
    for variable in key_variables:
        key = env.get(variable, "")
        if key:
            route = route_for(name, env.get(base_url_variable, ""), default_upstream, key)
            others = frozenset(key_variables) - {variable}
            return GatewayPlan(
                routes=(route,),
                env={base_url_variable: route.url, variable: STAND_IN_KEY},
                dropped=others,
            )
    raise ModelKeyInside(
        f"no model key is set in {' or '.join(key_variables)}, so the CLI would use {login}, "
        "which it reads inside the sandbox; set a key in one of those variables (the model "
        "gateway then keeps it outside), or set unsafe_agent_holds_model_key = true"
    )
