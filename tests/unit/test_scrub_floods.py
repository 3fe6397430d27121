"""Scrubbing stays linear: a flood of a shape's own prefix costs no more than its length.

Each test has a timeout far above what a linear scrubber needs on a slow machine and far below
what a quadratic one needs (an hour or more for half a megabyte): a shape that reads a run again
from every anchor inside it hangs its test instead of passing slowly."""

from __future__ import annotations

import pytest

from thirdshift.scrub import REDACTED, Scrubber, shape_prefixes

FLOOD_BYTES = 500_000
# Far above what a linear scrubber needs for half a megabyte on a slow machine (a tenth of a
# second here), far below what a quadratic one needs (an hour or more). Half a megabyte, not one:
# as telling, at half the suite's time.
TIMEOUT = 20
# Floods the first scrubber was quadratic on whose separator is not a hyphen: a key word before
# its separator, a token whose run takes in dots or slashes.
OTHER_FLOODS = ("key=", "key:", "pwd=", "token:", "secret=", "ATBB.", "gl.", "glc_/", "sntryu_=")


def flood(unit: str, size: int) -> str:
    return unit * (size // len(unit))


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(("kind", "prefix"), shape_prefixes(), ids=lambda v: repr(v))
def test_half_a_megabyte_of_a_shapes_own_prefix_is_scrubbed_in_linear_time(
    kind: str, prefix: str
) -> None:
    """Half a megabyte made of one prefix repeated, half bare (sk-sk-sk-...) and half with a
    hyphen after each (sk--sk--...: a run of token characters a token shape reads), is scrubbed
    in time."""
    text = flood(prefix, FLOOD_BYTES // 2) + " " + flood(prefix + "-", FLOOD_BYTES // 2)
    assert len(text) > 0.99 * FLOOD_BYTES
    Scrubber(["a-known-secret-value"])(text)


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("unit", OTHER_FLOODS)
def test_half_a_megabyte_of_a_key_word_or_a_token_with_its_separator_is_scrubbed_in_time(
    unit: str,
) -> None:
    """A key word and its separator (key=key=...), or a prefix and a character of its run
    (ATBB.ATBB....), repeated for half a megabyte, is scrubbed in time."""
    Scrubber()(flood(unit, FLOOD_BYTES))


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
