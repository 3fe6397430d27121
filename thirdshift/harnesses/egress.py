"""The egress proxy: a sealed session's only way out of its network namespace.

thirdshift runs one proxy per session, listening on a Unix socket that is bound into the
sandbox; a bridge inside (socat) listens on the namespace's own loopback, so the CLI and what
it starts use ordinary ``HTTPS_PROXY``/``HTTP_PROXY``. A request made to the proxy's own
address is a model request, handed to the session's model gateway, which adds the model key
(``model_gateway``, adr/0038). Else the proxy takes ``CONNECT host:port`` (TLS passes through
untouched: it never sees nor adds a credential) and plain HTTP in absolute form (``GET
http://host/...``, which Claude Code and Codex send for an http base URL), asks the Egress
allowlist rules (``thirdshift.network``) about each, resolves names itself
through its ``Resolver`` seam, and refuses everything else with a 403 and one report per host.
See adr/0023.

A proxy serves in the daemon's own process, so a hostile session must not be able to take what
every other Run needs (adr/0040): a session holds at most ``MAX_TUNNELS`` connections at once
(past them, a 503), each closed after ``IDLE_SECONDS`` without a byte either way; the hosts it
remembers having refused are at most ``MAX_REMEMBERED``; a plain-HTTP connection forwards
exactly one request; a proxy that fails closes what it holds and stops its own session only.
Its socket lies in ``socket_root()``, a directory private to thirdshift that every sandbox
hides, whatever ``TMPDIR`` says.

About 590 lines: the proxy is one session's whole network, its rules read in one place (what
it serves, what it refuses and reports, and what bounds each of them); the relay of a tunnel
(``egress_relay``) and the framing of a request (``http_framing``) are modules of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import queue
import socket
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses.egress_relay import RELAY_CHUNK, forward_one, relay_tunnel
from thirdshift.harnesses.http_framing import (
    BadRequest,
    RequestHead,
    answer,
    body_bytes,
    body_length,
    header_fields,
)
from thirdshift.harnesses.model_gateway import ModelGateway, is_gateway_authority
from thirdshift.network import Allowed, EgressAllowlist, normal_host, target_addresses

HEAD_LIMIT = 64 * 1024
"""A request head longer than this is no client the proxy serves."""
HEAD_SECONDS = 10.0
"""A client that has not sent its whole head by then is let go (it holds a slot)."""
MAX_REPORTS = 20
"""Refused hosts reported one by one a session; past them, one line says how many more."""
MAX_REMEMBERED = 256
"""Refused hosts a session's proxy remembers (so each is reported once); past them, a refusal
is counted, not remembered, so a session trying millions of names costs no memory."""
CONNECT_SECONDS = 10.0
MAX_TUNNELS = 16
"""Connections a session holds at once (each with at most one upstream: two descriptors of the
daemon's); past them the proxy answers 503 and closes at once. A CLI opens a few."""
IDLE_SECONDS = 300.0
"""A connection that moves no byte either way for this long is closed (a model's answer
streams pings far more often)."""
_ACCEPT_RETRY_SECONDS = 0.5
"""After the process ran out of descriptors, the wait before accepting again."""
_HOP_BY_HOP = frozenset(
    {"host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "upgrade"}
)
"""Header fields of the client's connection to the proxy, never sent on (Host is rewritten)."""
_SOCKET_NAME = "egress.sock"
_SUN_PATH_MAX = 107
"""The longest path a Unix socket can be bound at (108 bytes with the final NUL)."""


class EgressUnavailable(ThirdshiftError):
    """The directory of the egress proxies' sockets is not thirdshift's alone (another user
    made it, or it is a link or open to others); the message names it and the fix."""


def socket_root() -> Path:
    """The directory every session's egress proxy puts its socket under: fixed, so every
    sandbox can hide it whatever ``TMPDIR`` says, and short, for a Unix socket's path limit.
    Under /tmp, which every sandbox also empties, one per user (as tmux and ssh-agent do)."""
    return Path("/tmp") / f"thirdshift-egress-{os.getuid()}"  # noqa: S108 (checked: private)


def private_root(root: Path) -> Path:
    """``root``, made if missing (mode 0700), once it is checked to be thirdshift's alone: a
    directory (no link) of this user that no one else may enter. ``EgressUnavailable`` else."""
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700)
    found = os.lstat(root)
    problem = None
    if not stat.S_ISDIR(found.st_mode):
        problem = "is not a directory (a link, or a file)"
    elif found.st_uid != os.getuid():
        problem = f"belongs to another user (uid {found.st_uid})"
    elif found.st_mode & 0o077:
        problem = f"may be entered by others (mode {stat.S_IMODE(found.st_mode):o})"
    if problem is not None:
        raise EgressUnavailable(
            f"the egress proxies' directory {root} {problem}; remove it (thirdshift makes it "
            "again, private to this user) and start the Run again"
        )
    return root


class Resolver(Protocol):
    """Names to addresses, for the proxy alone (the agent has no DNS of its own)."""

    def resolve(self, host: str, port: int) -> Sequence[str]:
        """The addresses ``host`` has, in the order to try them; empty when it has none."""
        ...


class SystemResolver:
    """The machine's resolver (``getaddrinfo``: /etc/hosts, then DNS)."""

    def resolve(self, host: str, port: int) -> Sequence[str]:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return ()
        addresses: list[str] = []
        for _family, _type, _proto, _name, sockaddr in found:
            if str(sockaddr[0]) not in addresses:
                addresses.append(str(sockaddr[0]))
        return addresses


@dataclass(frozen=True)
class Refusal:
    """A connection the proxy would not make, reported once per host and port a session."""

    host: str
    port: int
    reason: str

    @property
    def line(self) -> str:
        if not self.host:  # the count of those past MAX_REPORTS
            return f"agent network: refused connect to {self.reason}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"agent network: refused connect to {host}:{self.port} ({self.reason})"


class EgressProxy:
    """One session's proxy, serving on ``socket_path`` from its own thread while open.

    ``on_refused`` hears the first refusal of each ``host:port`` (``MAX_REPORTS`` of them, then
    one saying how many more); it runs on a thread of its own, so a slow report (a database
    write) never holds a connection up, and what it raises is swallowed. ``on_failure`` hears,
    once, why a proxy that was serving stopped by itself (its session has no network from then
    on, so its caller stops the session); by then the proxy has closed every connection it held
    and its socket, and nothing of it reaches another session or the daemon."""

    def __init__(
        self,
        allowlist: EgressAllowlist,
        *,
        on_refused: Callable[[Refusal], None] = lambda _refusal: None,
        resolver: Resolver | None = None,
        connect_seconds: float = CONNECT_SECONDS,
        gateway: ModelGateway | None = None,
        max_tunnels: int = MAX_TUNNELS,
        idle_seconds: float = IDLE_SECONDS,
        on_failure: Callable[[str], None] = lambda _why: None,
        root: Path | None = None,
    ) -> None:
        self.allowlist = allowlist
        self._gateway = gateway
        self._on_refused = on_refused
        self._on_failure = on_failure
        self._resolver = resolver or SystemResolver()
        self._connect_seconds = connect_seconds
        self._max_tunnels = max_tunnels
        self._idle_seconds = idle_seconds
        self._root = root
        self._reported: set[tuple[str, int]] = set()
        self._reports: queue.SimpleQueue[Refusal | None] = queue.SimpleQueue()
        self._reporter: threading.Thread | None = None
        self._unreported = 0
        self._forgotten = False
        self._directory: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._serving = False
        self._stopped: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self.refused = 0
        """Connections refused in all (every one, not only the reported)."""
        self.busy = 0
        """Connections answered 503 because the session held ``max_tunnels`` already."""
        self.open_connections = 0
        """The session's connections open now (each with at most one upstream)."""

    @property
    def socket_path(self) -> Path:
        if self._directory is None:
            raise RuntimeError("the egress proxy is not open")
        return Path(self._directory) / _SOCKET_NAME

    @property
    def remembered_hosts(self) -> int:
        """How many refused ``host:port`` the proxy remembers (at most ``MAX_REMEMBERED``)."""
        return len(self._reported)

    @property
    def failure(self) -> str | None:
        """Why the proxy stopped serving by itself, or None while it serves (or was closed)."""
        if self._failure is None or not self._serving:
            return None
        return f"the agent's egress proxy stopped ({type(self._failure).__name__}: {self._failure})"

    def __enter__(self) -> EgressProxy:
        # Not tempfile's default directory: TMPDIR may lie where a sandbox sees it, and another
        # session could then connect to this socket and use this session's allowlist.
        root = private_root(self._root or socket_root())
        self._directory = tempfile.mkdtemp(prefix="s-", dir=root)
        if len(os.fsencode(self.socket_path)) > _SUN_PATH_MAX:
            self._cleanup()
            raise EgressUnavailable(
                f"the egress proxies' directory {root} is too deep for a Unix socket's path "
                f"({_SUN_PATH_MAX} bytes at most); use a shorter one"
            )
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.socket_path))
            listener.listen(128)
        except OSError:
            listener.close()
            self._cleanup()
            raise
        self._reporter = threading.Thread(target=self._report, name="egress-reports", daemon=True)
        self._reporter.start()
        self._thread = threading.Thread(
            target=self._serve, args=(listener,), name="egress-proxy", daemon=True
        )
        self._thread.start()
        self._ready.wait(10)
        if self._failure is not None:
            self._reports.put(None)
            self._cleanup()
            raise self._failure
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended by itself meanwhile
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._reporter is not None:
            if self._forgotten:
                more = f"over {self._unreported} more hosts ({self.refused} refusals in all)"
                self._reports.put(Refusal("", 0, more))
            elif self._unreported:
                self._reports.put(Refusal("", 0, f"{self._unreported} more hosts"))
            self._reports.put(None)
            self._reporter.join(30)
            self._reporter = None
        self._cleanup()

    def _report(self) -> None:
        while (refusal := self._reports.get()) is not None:
            with contextlib.suppress(Exception):
                self._on_refused(refusal)

    def _cleanup(self) -> None:
        if self._directory is not None:
            with contextlib.suppress(OSError):
                os.unlink(Path(self._directory) / _SOCKET_NAME)
            with contextlib.suppress(OSError):
                os.rmdir(self._directory)
            self._directory = None

    # -- the proxy's thread -----------------------------------------------------------------

    def _serve(self, listener: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(listener))
        except BaseException as error:  # before serving: handed to the opening thread
            self._failure = error
            # Whatever stopped the loop left the rest of its work suspended: close every
            # connection and the listener now, not when the garbage collector finds them.
            with contextlib.suppress(BaseException):
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            listener.close()
            self._ready.set()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        if self._failure is not None and self._serving:
            # No socket, so the session's bridge is refused at once rather than left waiting.
            with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: closed meanwhile
                os.unlink(self.socket_path)
            with contextlib.suppress(Exception):
                self._on_failure(self.failure or "the agent's egress proxy stopped")

    async def _main(self, listener: socket.socket) -> None:
        self._stopped = asyncio.Event()
        listener.setblocking(False)
        tasks: set[asyncio.Task[None]] = set()
        accepting = asyncio.ensure_future(self._accept(listener, tasks))
        stopping = asyncio.ensure_future(self._stopped.wait())
        self._serving = True
        self._ready.set()
        try:
            await asyncio.wait({accepting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if accepting.done():
                accepting.result()  # what stopped it, raised: the proxy failed
        finally:
            for task in (accepting, stopping, *tasks):
                task.cancel()
            await asyncio.gather(accepting, stopping, *tasks, return_exceptions=True)
            listener.close()
            # A closed transport lets go of its socket on the loop's next turns.
            for _ in range(3):
                await asyncio.sleep(0)

    async def _accept(self, listener: socket.socket, tasks: set[asyncio.Task[None]]) -> None:
        """Take connections one at a time; past ``max_tunnels`` open, answer 503 and close at
        once, so a session holds at most that many of the daemon's descriptors (twice, with
        their upstreams) plus the one being turned away."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, _ = await loop.sock_accept(listener)
            except OSError as error:
                if error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # The process is out of descriptors (not by this session: it holds few).
                await asyncio.sleep(_ACCEPT_RETRY_SECONDS)
                continue
            if len(tasks) >= self._max_tunnels:
                self.busy += 1
                _turn_away(connection, self._max_tunnels)
                continue
            task = asyncio.ensure_future(self._connection(connection))
            tasks.add(task)
            self.open_connections = len(tasks)

            def done(finished: asyncio.Task[None]) -> None:
                tasks.discard(finished)
                self.open_connections = len(tasks)
                if not finished.cancelled():
                    finished.exception()  # seen here; what stops the loop is raised there

            task.add_done_callback(done)

    async def _connection(self, connection: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=connection, limit=HEAD_LIMIT)
        except OSError:
            connection.close()
            return
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the client went away, or went quiet; nothing of ours is lost
        except asyncio.CancelledError:
            pass  # the session ended with this connection open
        except BadRequest as error:
            with contextlib.suppress(Exception):
                await answer(writer, error.status, error.text)
        except Exception:  # a request no rule foresaw: refused, never a logged traceback
            with contextlib.suppress(Exception):
                await answer(writer, 400, "not a request the proxy understands")
        finally:
            writer.close()

    async def _handle(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        tunnelled: bool = False,
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except asyncio.LimitOverrunError:
            await answer(writer, 431, "request head too long")
            return
        except TimeoutError:
            await answer(writer, 408, "request head not sent in time")
            return
        lines = head.decode("latin-1").split("\r\n")
        if any("\n" in line or "\r" in line for line in lines):
            # A bare line feed is read as a line end by some servers and not by others.
            await answer(writer, 400, "a request head's lines end in CRLF")
            return
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await answer(writer, 400, "not an HTTP proxy request")
            return
        method, target, version = parts
        if method == "CONNECT" and is_gateway_authority(target) and not tunnelled:
            # Some CLIs tunnel even a plain-http base URL: the request inside is the gateway's.
            writer.write(f"{version} 200 Connection Established\r\n\r\n".encode())
            await writer.drain()
            await self._handle(reader, writer, tunnelled=True)
            return
        if tunnelled and not target.startswith("/"):
            await answer(writer, 400, "only a model request goes through the gateway's tunnel")
            return
        if (gated := _gateway_target(target)) is not None:
            # A model request made to the proxy's own address: the model gateway's (adr/0038).
            if self._gateway is None:
                await answer(writer, 400, "this session has no model gateway")
                return
            await self._gateway.forward(method, gated, version, lines[1:], reader, writer)
            return
        if method == "CONNECT":
            host, port = _split_authority(target, default=443)
            upstream = await self._open(host, port, writer)
            if upstream is None:
                return
            writer.write(f"{version} 200 Connection Established\r\n\r\n".encode())
            await writer.drain()
            await relay_tunnel(reader, writer, *upstream, idle_seconds=self._idle_seconds)
            return
        if not target.lower().startswith("http://"):
            await answer(writer, 400, "only CONNECT and http:// requests in absolute form")
            return
        authority, _, path = target[len("http://") :].partition("/")
        host, port = _split_authority(authority, default=80)
        # Framed before anything is opened: a request whose end is unclear goes nowhere.
        fields = header_fields(lines[1:])
        length = body_length(RequestHead(method, target, version, fields))
        upstream = await self._open(host, port, writer)
        if upstream is None:
            return
        # Exactly one request a connection, the upstream told to close after it: what the
        # client sends past that request's body is dropped, so a second, pipelined request
        # never reaches the upstream unrewritten. Host names the target, so another virtual
        # host on an allowed address cannot be asked for.
        kept = [f"{name}: {value}" for name, value in fields if name.lower() not in _HOP_BY_HOP]
        first = [f"{method} /{path} {version}", f"Host: {authority}"]
        rewritten = "\r\n".join([*first, *kept, "Connection: close"]) + "\r\n\r\n"
        upstream[1].write(rewritten.encode("latin-1"))
        body = body_bytes(reader, length, idle_seconds=self._idle_seconds)
        await forward_one(reader, writer, *upstream, body, idle_seconds=self._idle_seconds)

    async def _open(
        self, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The upstream connection to ``host:port``, or None once refused (and answered)."""
        if not host or port <= 0:
            await answer(writer, 400, "no host and port to connect to")
            return None
        resolved: Sequence[str] | None = None
        if self.allowlist.entry_for(host, port) is not None:
            loop = asyncio.get_running_loop()
            name = normal_host(host)
            try:
                resolved = await asyncio.wait_for(
                    loop.run_in_executor(None, self._resolver.resolve, name, port),
                    self._connect_seconds,
                )
            except TimeoutError:
                resolved = ()  # a resolver that hangs holds no connection up
        decision = target_addresses(self.allowlist, host, port, resolved)
        if isinstance(decision, Allowed):
            failure: str | None = "no answer"
            for address in decision.addresses:
                try:
                    return await asyncio.wait_for(
                        asyncio.open_connection(address, port, limit=RELAY_CHUNK),
                        self._connect_seconds,
                    )
                except (OSError, TimeoutError) as error:
                    failure = error.strerror if isinstance(error, OSError) else "timed out"
            await answer(writer, 502, f"{host}:{port} cannot be reached ({failure})")
            return None
        self._refuse(Refusal(_shown(host), port, decision.reason))
        await answer(
            writer,
            403,
            f"thirdshift refused connect to {host}:{port} ({decision.reason}); the agent's "
            "network reaches only its model provider and agent_network_allow",
        )
        return None

    def _refuse(self, refusal: Refusal) -> None:
        self.refused += 1
        key = (refusal.host, refusal.port)
        if key in self._reported:
            return
        if len(self._reported) >= MAX_REMEMBERED:
            self._forgotten = True  # counted in ``refused``, not remembered
            return
        self._reported.add(key)
        if len(self._reported) > MAX_REPORTS:
            self._unreported += 1
            return
        self._reports.put(refusal)


def _gateway_target(target: str) -> str | None:
    """The origin-form path of a request made to the model gateway (a path, or an absolute
    ``http://`` URL naming the gateway's own address), or None for any other request."""
    if target.startswith("/"):
        return target
    if target.lower().startswith("http://"):
        authority, slash, path = target[len("http://") :].partition("/")
        if is_gateway_authority(authority):
            return slash + path or "/"
    return None


def _shown(host: str) -> str:
    """A host as a report shows it: one line of printable text, not over 255 characters."""
    shown = "".join(c if c.isprintable() else "?" for c in normal_host(host))
    return shown[:255] or "?"


def _split_authority(authority: str, *, default: int) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) in two; port ``default`` when it is left out, 0 when it is
    no number."""
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif authority.count(":") == 1:
        host, port_text = authority.split(":")
    else:
        host, port_text = authority, ""
    if not port_text:
        return host, default
    number = port_text.isascii() and port_text.isdigit() and len(port_text) < 6
    return host, int(port_text) if number else 0


def _turn_away(connection: socket.socket, limit: int) -> None:
    """A 503 to a connection past the session's limit, written without waiting (it fits any
    socket buffer), then closed: it holds a descriptor for no longer than that."""
    body = f"this session holds {limit} connections through its egress proxy already\n".encode()
    answer = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    with contextlib.suppress(OSError):
        connection.setblocking(False)
        connection.send(answer)
    connection.close()
