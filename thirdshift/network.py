"""The Egress allowlist: where an agent session's network may go, as pure rules.

A sealed session has a network namespace of its own; its only way out is thirdshift's egress
proxy, which asks these rules about every connection (adr/0023). An entry is ``host[:port]``
(port 443 when left out): a name matches itself, ``*.name`` matches every name below it (not
``name`` itself), and an address matches that address. A name is resolved by the proxy, never
by the agent, and reached only at public addresses: a name that resolves to a loopback, private
or link-local address is refused (DNS rebinding). An address written in an entry is the
operator's own word and is reached even when it is private (the scripted model server on
127.0.0.1, a registry mirror on the office network), and so is the host of a base URL the
operator configured, wherever its name resolves.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORT = 443
_NAME = re.compile(r"^(?:\*\.)?(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?\.)*[a-z0-9_-]{1,63}$")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class HostPattern:
    """One entry of the Egress allowlist."""

    host: str
    """Lower case: a name, ``*.`` and a name, or an address (IPv6 without brackets)."""
    port: int
    any_address: bool = False
    """Reached wherever the name resolves, private addresses included: only for a base URL the
    operator configured (``http://localhost:8080``, a gateway on the office network)."""

    @property
    def address(self) -> Address | None:
        """The address this entry names, when it names one."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    def matches(self, host: str, port: int) -> bool:
        if port != self.port:
            return False
        wanted = normal_host(host)
        if self.host.startswith("*."):
            return wanted.endswith(self.host[1:]) and len(wanted) > len(self.host) - 1
        mine = self.address
        if mine is not None:
            try:
                return ipaddress.ip_address(wanted) == mine
            except ValueError:
                return False
        return wanted == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def normal_host(host: str) -> str:
    """A host as the rules compare it: lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def is_host(host: str) -> bool:
    """Whether ``host`` (normalized) is a plain name or an address: nothing a resolver might
    read differently from these rules (a NUL ends a name for getaddrinfo)."""
    if host.startswith("*") or not host.isascii():
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(_NAME.match(host))
    return True


def parse_host_pattern(text: str) -> HostPattern:
    """``host[:port]`` as an entry, or a ValueError showing the shape it must have."""
    raw = text.strip()
    host, port_text = raw, ""
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        if rest and not rest.startswith(":"):
            host = ""
        port_text = rest[1:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    host = normal_host(host)
    port = DEFAULT_PORT
    if port_text:
        port = int(port_text) if port_text.isascii() and port_text.isdigit() else 0
    valid_host = bool(_NAME.match(host))
    try:
        ipaddress.ip_address(host)
        valid_host = True
    except ValueError:
        pass
    if not host or not valid_host or not 0 < port < 65536 or host in ("*", "*."):
        raise ValueError(
            f"'{text}' is not a host pattern: write host[:port] (port 443 when left out), "
            "for example registry.example.com, *.packages.example.org:443 or 10.0.0.5:8080"
        )
    return HostPattern(host, port)


def endpoint_of_url(url: str) -> HostPattern | None:
    """The host and port a base URL (``https://api.example.com/v1``) is reached at, or None
    when it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return HostPattern(
        normal_host(parts.hostname),
        port or (443 if parts.scheme == "https" else 80),
        any_address=True,
    )


@dataclass(frozen=True)
class EgressAllowlist:
    """Where a session's network may go: its Harness's model provider, the base URL the
    operator configured, and ``agent_network_allow``."""

    patterns: tuple[HostPattern, ...] = ()

    @classmethod
    def of(cls, *groups: Iterable[HostPattern | str]) -> EgressAllowlist:
        found: list[HostPattern] = []
        for group in groups:
            for entry in group:
                pattern = parse_host_pattern(entry) if isinstance(entry, str) else entry
                if pattern not in found:
                    found.append(pattern)
        return cls(tuple(found))

    def entry_for(self, host: str, port: int) -> HostPattern | None:
        if not is_host(normal_host(host)):
            return None
        return next((p for p in self.patterns if p.matches(host, port)), None)

    def __str__(self) -> str:
        return ", ".join(str(pattern) for pattern in self.patterns) or "nothing"


def not_public(address: Address) -> str | None:
    """Why ``address`` is no public address (``loopback``, ``private``, ``link-local``, ...),
    or None for a public one. An IPv4 address inside IPv6 is judged as itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return "site-local"
        # An IPv4 address carried inside (mapped, or 6to4) is judged as itself.
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            address = inner
    for reason, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not global", not address.is_global),
    ):
        if flag:
            return reason
    return None


@dataclass(frozen=True)
class Allowed:
    """Connect to these addresses, in order."""

    addresses: tuple[str, ...]


@dataclass(frozen=True)
class EgressRefused:
    """Not reached; ``reason`` says why in a few words."""

    reason: str


def target_addresses(
    allowlist: EgressAllowlist, host: str, port: int, resolved: Sequence[str] | None
) -> Allowed | EgressRefused:
    """Where a connection to ``host:port`` may go. ``resolved`` is what the proxy's resolver
    gave for a name (None: it was not asked, or found nothing); an address is not resolved."""
    if not is_host(normal_host(host)):
        return EgressRefused("not a host name")
    entry = allowlist.entry_for(host, port)
    if entry is None:
        return EgressRefused("not on the Egress allowlist")
    try:
        literal: Address | None = ipaddress.ip_address(normal_host(host))
    except ValueError:
        literal = None
    if literal is not None:
        # Only an entry that names the address itself lets a private one through.
        if entry.address is None and (why := not_public(literal)) is not None:
            return EgressRefused(f"a {why} address")
        return Allowed((str(literal),))
    if not resolved:
        return EgressRefused("the name does not resolve")
    if entry.any_address:
        return Allowed(tuple(resolved))
    public: list[str] = []
    for text in resolved:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if not_public(address) is None:
            public.append(str(address))
        else:
            # A name that points anywhere inside is refused whole: a rebinding answer mixes.
            return EgressRefused(f"it resolves to a {not_public(address)} address ({address})")
    if not public:
        return EgressRefused("the name does not resolve")
    return Allowed(tuple(public))
