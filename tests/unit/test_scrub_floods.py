"""Scrubbing stays linear: a flood of a shape's own prefix costs no more than its length.

Each test has a timeout far above what a linear scrubber needs on a slow machine and far below
what a quadratic one needs (hours for a megabyte): a shape that reads a run again from every
anchor inside it hangs its test instead of passing slowly."""

from __future__ import annotations

import pytest

from thirdshift.scrub import REDACTED, Scrubber, shape_prefixes

MEGABYTE = 1_000_000
# After the prefix: nothing, and what a token's run takes in (sk-sk-, sk--sk--, sk-.sk-. ...).
SEPARATORS = ("", "-", ".", "=", ":", " ", "/", "\\n")


def flood(prefix: str, size: int = MEGABYTE) -> str:
    """``size`` characters of ``prefix`` repeated, in as many stretches as there are separators,
    each with its own separator after every prefix."""
    stretch = size // len(SEPARATORS)
    return "".join((prefix + s) * (stretch // len(prefix + s)) for s in SEPARATORS)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("kind", "prefix"), shape_prefixes(), ids=lambda v: repr(v))
def test_a_megabyte_of_a_shapes_own_prefix_is_scrubbed_in_linear_time(
    kind: str, prefix: str
) -> None:
    """1 MB made of one prefix, repeated, is scrubbed well within the timeout."""
    text = flood(prefix)
    assert len(text) > 0.99 * MEGABYTE
    Scrubber(["a-known-secret-value"])(text)


def test_every_shape_has_a_prefix_to_flood() -> None:
    """The floods cover token shapes and every context alike."""
    kinds = {kind for kind, _ in shape_prefixes()}
    contexts = {
        "authorization header",
        "bearer token",
        "credentials in a URL",
        "credentials in a command line",
        "generic assignment",
    }
    assert contexts | {"Anthropic API key", "JSON web token", "private key block"} <= kinds
    assert len(kinds) > 50


def test_a_flood_around_a_real_token_still_redacts_it() -> None:
    """Skipping what an earlier try already read never skips a token of its own after it."""
    token = "sk-ant-api03-" + "Zx9" * 12
    text = "sk-" * 50_000 + " " + token + " " + "eyJ-" * 50_000
    scrubbed = Scrubber()(text)
    assert token not in scrubbed
    assert f" {REDACTED} " in scrubbed


def test_a_named_value_longer_than_its_bound_is_redacted_to_its_end() -> None:
    """A value is judged on its first kilobyte but redacted whole."""
    value = "s3cr3t-" * 1000
    scrubbed = Scrubber()(f"password={value} done")
    assert scrubbed == f"password={REDACTED} done"
