"""The status page's server: uvicorn in a thread of the daemon's process, stopped with it."""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from thirdshift.errors import ConfigError

if TYPE_CHECKING:
    from starlette.applications import Starlette

STARTUP_SECONDS = 10.0


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6), or a ConfigError showing the form."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {text}: expected HOST:PORT, for example 127.0.0.1:8765")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether binding ``host`` listens on every address of this machine (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def own_host_names() -> tuple[str, ...]:
    """The names and addresses a request reaching this machine may give as its ``Host``: the
    host's name and fully qualified name, what they resolve to, and the addresses of its
    interfaces as far as Linux tells them cheaply (``/proc``); whatever cannot be read is left
    out."""
    names: set[str] = set()
    with contextlib.suppress(OSError):
        names.update({socket.gethostname(), socket.getfqdn()})
    for name in list(names):
        with contextlib.suppress(OSError, UnicodeError):
            names.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    names.update(_interface_addresses())
    return tuple(sorted(name.lower() for name in names if name))


def _interface_addresses() -> set[str]:
    found: set[str] = set()
    with contextlib.suppress(OSError):
        # fib_trie names each local IPv4 address on the line before its "/32 host LOCAL".
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in itertools.pairwise(lines):
            if line.strip() == "/32 host LOCAL":
                found.add(before.strip().removeprefix("|-- "))
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.add(str(ipaddress.IPv6Address(int(line.split()[0], 16))))
    return {address for address in found if _is_address(address)}


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


MAX_CONNECTIONS = 64
"""Connections the daemon's HTTP server holds at once."""


class StatusServer:
    """Serves ``app`` on ``host:port`` from a daemon thread; ``start`` returns once it listens
    (or raises ConfigError naming the address and why), ``stop`` ends it."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        import uvicorn  # only where a page is served: the address checks above need none of it

        self._host = host
        self._port = port
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            # Past this many connections at once a request gets 503: strangers (the webhook is
            # open to the internet) must not use up the descriptors the Runs' sessions need.
            limit_concurrency=MAX_CONNECTIONS,
        )
        # Run from a thread other than the main one, uvicorn leaves the signals alone: SIGTERM
        # stops the daemon, which stops this server.
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name="thirdshift-status-page", daemon=True
        )

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}/"

    def start(self) -> None:
        self._check_free()
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(
                    f"the status page could not listen on {self._host}:{self._port}; "
                    "choose another --http address"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def _check_free(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((self._host, self._port))
            except OSError as error:
                raise ConfigError(
                    f"the status page cannot listen on {self._host}:{self._port} "
                    f"({error.strerror}); choose another --http address"
                ) from error
