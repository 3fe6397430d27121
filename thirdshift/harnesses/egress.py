"""The egress proxy: a sealed session's only way out of its network namespace.

thirdshift runs one proxy per session, listening on a Unix socket that is bound into the
sandbox; a bridge inside (socat) listens on the namespace's own loopback, so the CLI and what
it starts use ordinary ``HTTPS_PROXY``/``HTTP_PROXY``. The proxy takes ``CONNECT host:port``
(TLS passes through untouched: the proxy never sees nor adds a credential) and plain HTTP in
absolute form (``GET http://host/...``, which Claude Code and Codex send for an http base URL),
asks the Egress allowlist rules (``thirdshift.network``) about each, resolves names itself
through its ``Resolver`` seam, and refuses everything else with a 403 and one report per host.
See adr/0023.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

from thirdshift.network import Allowed, EgressAllowlist, normal_host, target_addresses

HEAD_LIMIT = 64 * 1024
"""A request head longer than this is no client the proxy serves."""
HEAD_SECONDS = 10.0
"""A client that has not sent its whole head by then is let go (it holds a slot)."""
MAX_REPORTS = 20
"""Refused hosts reported one by one a session; past them, one line says how many more."""
CONNECT_SECONDS = 10.0
MAX_CONNECTIONS = 256
"""Connections open at once; past them the proxy answers 503 (a session that loops connecting
cannot exhaust thirdshift's file descriptors)."""
_RELAY_CHUNK = 64 * 1024


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
    write) never holds a connection up, and what it raises is swallowed."""

    def __init__(
        self,
        allowlist: EgressAllowlist,
        *,
        on_refused: Callable[[Refusal], None] = lambda _refusal: None,
        resolver: Resolver | None = None,
        connect_seconds: float = CONNECT_SECONDS,
    ) -> None:
        self.allowlist = allowlist
        self._on_refused = on_refused
        self._resolver = resolver or SystemResolver()
        self._connect_seconds = connect_seconds
        self._reported: set[tuple[str, int]] = set()
        self._reports: queue.SimpleQueue[Refusal | None] = queue.SimpleQueue()
        self._reporter: threading.Thread | None = None
        self._unreported = 0
        self._directory: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._failure: BaseException | None = None
        self.refused = 0
        """Connections refused in all (every one, not only the reported)."""

    @property
    def socket_path(self) -> Path:
        if self._directory is None:
            raise RuntimeError("the egress proxy is not open")
        return Path(self._directory) / "egress.sock"

    def __enter__(self) -> EgressProxy:
        # A Unix socket's path is short (108 bytes): a private directory in the temp dir, not
        # under a home that may lie deep.
        self._directory = tempfile.mkdtemp(prefix="thirdshift-egress-")
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
            if self._unreported:
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
                os.unlink(Path(self._directory) / "egress.sock")
            with contextlib.suppress(OSError):
                os.rmdir(self._directory)
            self._directory = None

    # -- the proxy's thread -----------------------------------------------------------------

    def _serve(self, listener: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(listener))
        except BaseException as error:  # handed to the opening thread, which raises it
            self._failure = error
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self, listener: socket.socket) -> None:
        self._stopped = asyncio.Event()
        limit = asyncio.Semaphore(MAX_CONNECTIONS)
        tasks: set[asyncio.Task[None]] = set()

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                tasks.add(task)
            try:
                if limit.locked():
                    await _answer(writer, 503, "too many connections at once")
                    return
                async with limit:
                    await self._handle(reader, writer)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass  # the client went away; nothing of ours is lost
            except asyncio.CancelledError:
                pass  # the session ended with this connection open
            except Exception:  # a request no rule foresaw: refused, never a logged traceback
                with contextlib.suppress(Exception):
                    await _answer(writer, 400, "not a request the proxy understands")
            finally:
                writer.close()
                if task is not None:
                    tasks.discard(task)

        try:
            server = await asyncio.start_unix_server(accepted, sock=listener, limit=HEAD_LIMIT)
        except BaseException:
            listener.close()
            raise
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        except asyncio.LimitOverrunError:
            await _answer(writer, 431, "request head too long")
            return
        except TimeoutError:
            await _answer(writer, 408, "request head not sent in time")
            return
        lines = head.decode("latin-1").split("\r\n")
        if any("\n" in line or "\r" in line for line in lines):
            # A bare line feed is read as a line end by some servers and not by others.
            await _answer(writer, 400, "a request head's lines end in CRLF")
            return
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            await _answer(writer, 400, "not an HTTP proxy request")
            return
        method, target, version = parts
        if method == "CONNECT":
            host, port = _split_authority(target, default=443)
            upstream = await self._open(host, port, writer)
            if upstream is None:
                return
            writer.write(f"{version} 200 Connection Established\r\n\r\n".encode())
            await writer.drain()
            await _relay(reader, writer, *upstream)
            return
        if not target.lower().startswith("http://"):
            await _answer(writer, 400, "only CONNECT and http:// requests in absolute form")
            return
        authority, _, path = target[len("http://") :].partition("/")
        host, port = _split_authority(authority, default=80)
        upstream = await self._open(host, port, writer)
        if upstream is None:
            return
        # One request a connection (the upstream is told to close after it): a second one
        # would reach it in absolute form, which not every server reads. Host names the target,
        # so another virtual host on an allowed address cannot be asked for.
        dropped = (
            "proxy-connection:",
            "proxy-authorization:",
            "connection:",
            "keep-alive:",
            "host:",
        )
        kept = [line for line in lines[1:] if line and not line.lower().startswith(dropped)]
        first = [f"{method} /{path} {version}", f"Host: {authority}"]
        rewritten = "\r\n".join([*first, *kept, "Connection: close"]) + "\r\n\r\n"
        upstream[1].write(rewritten.encode("latin-1"))
        await _relay(reader, writer, *upstream)

    async def _open(
        self, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """The upstream connection to ``host:port``, or None once refused (and answered)."""
        if not host or port <= 0:
            await _answer(writer, 400, "no host and port to connect to")
            return None
        resolved: Sequence[str] | None = None
        if self.allowlist.entry_for(host, port) is not None:
            loop = asyncio.get_running_loop()
            name = normal_host(host)
            resolved = await loop.run_in_executor(None, self._resolver.resolve, name, port)
        decision = target_addresses(self.allowlist, host, port, resolved)
        if isinstance(decision, Allowed):
            failure: str | None = "no answer"
            for address in decision.addresses:
                try:
                    return await asyncio.wait_for(
                        asyncio.open_connection(address, port, limit=_RELAY_CHUNK),
                        self._connect_seconds,
                    )
                except (OSError, TimeoutError) as error:
                    failure = error.strerror if isinstance(error, OSError) else "timed out"
            await _answer(writer, 502, f"{host}:{port} cannot be reached ({failure})")
            return None
        self._refuse(Refusal(_shown(host), port, decision.reason))
        await _answer(
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
        self._reported.add(key)
        if len(self._reported) > MAX_REPORTS:
            self._unreported += 1
            return
        self._reports.put(refusal)


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


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reasons = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout"}
    reasons |= {431: "Request Header Fields Too Large"}
    reasons |= {502: "Bad Gateway", 503: "Service Unavailable"}
    body = (text + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


async def _relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides are done; what the client sent after its head goes on."""

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(_RELAY_CHUNK):
                sink.write(chunk)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()
        except OSError:
            sink.close()

    try:
        await asyncio.gather(
            pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer)
        )
    finally:
        upstream_writer.close()
