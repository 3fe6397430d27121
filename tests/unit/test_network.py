"""The Egress allowlist's rules: host patterns, base URLs, and where a connection may go."""

from __future__ import annotations

import pytest

from thirdshift.network import (
    Allowed,
    EgressAllowlist,
    EgressRefused,
    HostPattern,
    endpoint_of_url,
    parse_host_pattern,
    target_addresses,
)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("registry.example.com", HostPattern("registry.example.com", 443)),
        ("Registry.Example.COM.", HostPattern("registry.example.com", 443)),
        ("*.packages.example.org:443", HostPattern("*.packages.example.org", 443)),
        ("10.0.0.5:8080", HostPattern("10.0.0.5", 8080)),
        ("[::1]:9000", HostPattern("::1", 9000)),
        ("localhost:80", HostPattern("localhost", 80)),
    ],
)
def test_a_host_pattern_is_read_with_port_443_when_left_out(
    text: str, pattern: HostPattern
) -> None:
    assert parse_host_pattern(text) == pattern


@pytest.mark.parametrize(
    "text",
    ["", "*", "*.", "http://example.com", "example.com:0", "example.com:99999", "a b", "x:y"],
)
def test_a_malformed_host_pattern_is_refused_showing_the_shape(text: str) -> None:
    with pytest.raises(ValueError, match=r"write host\[:port\] \(port 443 when left out\)"):
        parse_host_pattern(text)


def test_a_wildcard_matches_the_names_below_it_and_not_the_name_itself() -> None:
    pattern = parse_host_pattern("*.packages.example.org")
    assert pattern.matches("files.packages.example.org", 443)
    assert pattern.matches("a.b.packages.example.org", 443)
    assert not pattern.matches("packages.example.org", 443)
    assert not pattern.matches("evilpackages.example.org", 443)
    assert not pattern.matches("files.packages.example.org", 80)


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:8123", HostPattern("127.0.0.1", 8123, any_address=True)),
        ("https://gateway.example.com/v1", HostPattern("gateway.example.com", 443, True)),
        ("http://models.internal/v1", HostPattern("models.internal", 80, any_address=True)),
        ("ftp://example.com", None),
        ("not a url", None),
        ("http://example.com:notaport", None),
    ],
)
def test_a_base_url_gives_the_host_and_port_it_is_reached_at(
    url: str, endpoint: HostPattern | None
) -> None:
    assert endpoint_of_url(url) == endpoint


ALLOWLIST = EgressAllowlist.of(["api.anthropic.com", "127.0.0.1:8123", "*.example.org"])


def test_a_host_not_on_the_allowlist_is_refused_before_it_is_resolved() -> None:
    assert target_addresses(ALLOWLIST, "169.254.169.254", 80, None) == EgressRefused(
        "not on the Egress allowlist"
    )
    assert isinstance(
        target_addresses(ALLOWLIST, "api.anthropic.com", 80, ["1.2.3.4"]), EgressRefused
    )


def test_an_allowed_name_is_reached_at_its_public_addresses() -> None:
    decision = target_addresses(ALLOWLIST, "api.anthropic.com", 443, ["160.79.104.10"])
    assert decision == Allowed(("160.79.104.10",))


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("169.254.169.254", "link-local"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 (an address a name may resolve to, not bound)
    ],
)
def test_an_allowed_name_that_resolves_inside_is_refused(address: str, kind: str) -> None:
    """DNS rebinding: the allowlist names a host, the answer points at this machine."""
    decision = target_addresses(ALLOWLIST, "cdn.example.org", 443, ["93.184.215.14", address])
    assert isinstance(decision, EgressRefused)
    assert kind in decision.reason


def test_an_address_written_in_the_allowlist_is_reached_even_on_loopback() -> None:
    """The operator's own word: the scripted model server, a mirror on the office network."""
    assert target_addresses(ALLOWLIST, "127.0.0.1", 8123, None) == Allowed(("127.0.0.1",))
    assert isinstance(target_addresses(ALLOWLIST, "127.0.0.1", 5432, None), EgressRefused)


def test_an_address_under_a_wildcard_name_is_not_taken_for_that_name() -> None:
    allowlist = EgressAllowlist.of(["*.0.0.1:443"])
    assert isinstance(target_addresses(allowlist, "127.0.0.1", 443, None), EgressRefused)


def test_a_name_that_does_not_resolve_is_refused() -> None:
    assert target_addresses(ALLOWLIST, "api.anthropic.com", 443, []) == EgressRefused(
        "the name does not resolve"
    )


def test_the_allowlist_keeps_each_entry_once_in_order() -> None:
    allowlist = EgressAllowlist.of(["a.example.org", "b.example.org"], ["A.example.org:443"])
    assert str(allowlist) == "a.example.org:443, b.example.org:443"


@pytest.mark.parametrize(
    "host",
    ["9.9.9.9\x00.example.org", "evil.com\x00.example.org", "a\nb.example.org", "*.example.org"],
)
def test_a_host_a_resolver_would_read_differently_is_refused_unresolved(host: str) -> None:
    """getaddrinfo ends a name at its NUL: ``9.9.9.9\\0.example.org`` would match a wildcard
    and then reach 9.9.9.9."""
    assert ALLOWLIST.entry_for(host, 443) is None
    assert target_addresses(ALLOWLIST, host, 443, ["93.184.215.14"]) == EgressRefused(
        "not a host name"
    )


def test_a_port_of_other_digits_than_ascii_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a host pattern"):
        parse_host_pattern("example.org:8\u00b2")


@pytest.mark.parametrize(("address", "kind"), [("2002:7f00:1::1", "loopback"), ("fec0::1", "site")])
def test_an_address_inside_6to4_or_site_local_v6_is_not_public(address: str, kind: str) -> None:
    decision = target_addresses(ALLOWLIST, "cdn.example.org", 443, [address])
    assert isinstance(decision, EgressRefused)
    assert kind in decision.reason


def test_a_configured_base_url_is_reached_wherever_its_name_resolves() -> None:
    """The operator's own base URL (``http://localhost:8080``, a gateway on the office
    network) is no rebinding: its name may resolve to a private address."""
    endpoint = endpoint_of_url("http://localhost:8080/v1")
    assert endpoint is not None
    allowlist = EgressAllowlist.of([endpoint], ["localhost:9000"])
    assert target_addresses(allowlist, "localhost", 8080, ["127.0.0.1"]) == Allowed(("127.0.0.1",))
    assert isinstance(target_addresses(allowlist, "localhost", 9000, ["127.0.0.1"]), EgressRefused)
