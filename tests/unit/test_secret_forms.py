"""Encoded secrets: each known value is found and removed in its base64 (every alignment, both
alphabets, padded or not), base32, hex, percent-encoded and reversed forms (adr/0043)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.support.secret_corpus import BENIGN
from thirdshift.scrub import KNOWN_VALUE, REDACTED, Scrubber
from thirdshift.secret_forms import MIN_ENCODED_LENGTH, encoded_forms, stable_middle

# No recognisable shape of its own: only its value makes it a secret. It has characters base64
# writes differently in its two alphabets once encoded (the ``?`` and ``>``).
SECRET = "opaque?value>of-the-deploy-hook-42"
DATA = SECRET.encode()
# What may stand before and after the secret in what was encoded with it.
LEADS = (b"", b"K", b"K=")
TRAIL = b"\nnext line\n"


def _leaks(text: str) -> list[str]:
    """The encodings of the secret that are still in ``text``."""
    shown = {
        "plain": SECRET,
        "reversed": SECRET[::-1],
        "hex": DATA.hex(),
        "HEX": DATA.hex().upper(),
        **{f"base64 +{n}": stable_middle(base64.b64encode, 6, DATA, n) for n in range(3)},
        **{f"url-safe +{n}": stable_middle(base64.urlsafe_b64encode, 6, DATA, n) for n in range(3)},
    }
    return [name for name, form in shown.items() if form in text]


@pytest.mark.parametrize("lead", LEADS, ids=["aligned", "one byte before", "two bytes before"])
@pytest.mark.parametrize(
    "encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["standard", "url-safe"]
)
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
def test_the_secret_base64_encoded_with_whatever_came_before_it_is_redacted(
    lead: bytes, encode: Callable[[bytes], bytes], padded: bool
) -> None:
    """Whatever bytes were encoded before it, the characters only the secret decides are
    found, in either alphabet, with or without padding."""
    encoded = encode(lead + DATA + TRAIL).decode()
    encoded = encoded if padded else encoded.rstrip("=")
    scrub = Scrubber([SECRET])

    scrubbed = scrub(f"config: {encoded} (done)")

    assert REDACTED in scrubbed
    assert _leaks(scrubbed) == []
    # Before the redaction, no more than the characters the leading bytes share.
    assert scrubbed.index(REDACTED) <= len("config: ") + len(lead) + 1
    [finding] = scrub.findings(encoded)
    assert finding.kind == f"{KNOWN_VALUE}, base64"


@pytest.mark.parametrize("lead", [bytes(range(n)) for n in range(5)])
@pytest.mark.parametrize("case", [str.upper, str.lower])
def test_the_secret_base32_encoded_in_any_alignment_and_case_is_redacted(
    lead: bytes, case: Callable[[str], str]
) -> None:
    """base32 writes 5 bytes as 8 characters: each of the five alignments is found."""
    encoded = case(base64.b32encode(lead + DATA + TRAIL).decode())
    scrub = Scrubber([SECRET])

    assert scrub.findings(encoded)[0].kind == f"{KNOWN_VALUE}, base32"
    assert stable_middle(base64.b32encode, 5, DATA, len(lead)).lower() not in scrub(encoded).lower()


@pytest.mark.parametrize(
    ("encoded", "kind"),
    [
        (DATA.hex(), "hex"),
        (DATA.hex().upper(), "hex"),
        ("".join(f"%{b:02X}" for b in DATA), "percent-encoded"),
        ("".join(f"%{b:02x}" for b in DATA), "percent-encoded"),
        (quote(SECRET, safe=""), "percent-encoded"),
        (SECRET[::-1], "reversed"),
    ],
    ids=["hex", "HEX", "every byte", "every byte, lower case", "reserved only", "reversed"],
)
def test_the_secret_hex_percent_encoded_or_reversed_is_redacted(encoded: str, kind: str) -> None:
    """Hex in either case, percent-encoding of every byte or of the reserved ones, and the
    value written backwards are each the secret."""
    scrub = Scrubber([SECRET])
    text = f'{{"note": "x={encoded}&y=1"}}'

    assert scrub(text) == f'{{"note": "x={REDACTED}&y=1"}}'
    assert scrub.findings(text)[0].kind == f"{KNOWN_VALUE}, {kind}"


def test_a_finding_names_the_encoding_but_never_the_secret() -> None:
    """The kind says how the secret was hidden, so a person knows what to look for."""
    text = f"{base64.b64encode(DATA).decode()} and {SECRET[::-1]} and {SECRET}"
    findings = Scrubber([SECRET]).findings(text)
    assert [f.kind for f in findings] == [
        f"{KNOWN_VALUE}, base64",
        f"{KNOWN_VALUE}, reversed",
        KNOWN_VALUE,
    ]
    assert all(SECRET not in f.kind for f in findings)


def test_text_that_holds_no_secret_comes_through_unchanged() -> None:
    """Digests, UUIDs, base64 test data and prose are not a secret's encoding: the forms of
    a few known values change none of them."""
    scrub = Scrubber([SECRET, "another-known-value-0123", "sandbox_maintainer_token_0123456789"])
    for text in BENIGN:
        assert scrub(text) == Scrubber()(text), text
    other = base64.b64encode(b"opaque?value>of-another-hook-42").decode()
    assert scrub(other) == other


def test_a_secret_shorter_than_the_minimum_is_found_only_as_it_is() -> None:
    """Forms of a short value would be short enough to occur by chance: none are derived."""
    short = "hunter2hunt"  # 11 characters: a known value, not expanded
    assert len(short) == MIN_ENCODED_LENGTH - 1
    assert encoded_forms(short) == ()
    scrub = Scrubber([short])
    assert scrub(f"pw {short}") == f"pw {REDACTED}"
    for form in (short[::-1], short.encode().hex(), base64.b64encode(short.encode()).decode()):
        assert scrub(form) == form
    assert encoded_forms(short + "!") != ()


def test_each_form_is_derived_once_and_none_is_the_secret_itself() -> None:
    """One search per form: a text two encodings share is looked for once."""
    forms = encoded_forms(SECRET)
    texts = [form.text for form in forms]
    assert len(texts) == len(set(texts))
    assert SECRET not in texts
    assert {form.encoding for form in forms} == {
        "base64",
        "base32",
        "hex",
        "percent-encoded",
        "reversed",
    }


def test_a_scrubbed_session_log_line_holding_an_encoded_secret_stays_json() -> None:
    """The forms are ASCII with nothing JSON escapes: a line stays valid JSON once scrubbed."""
    line = json.dumps({"type": "tool_result", "content": base64.b64encode(b"k=" + DATA).decode()})
    scrubbed = Scrubber([SECRET])(line)
    assert REDACTED in json.loads(scrubbed)["content"]


@pytest.mark.parametrize(
    "form",
    [DATA.hex(), stable_middle(base64.b64encode, 6, DATA, 1), SECRET[::-1]],
    ids=["hex", "base64", "reversed"],
)
def test_an_encoded_secret_cut_at_the_end_of_a_text_is_removed(form: str) -> None:
    """A line cut before it was scrubbed (an event's summary) may end inside an encoding: what
    is left of it, 6 characters or more, goes as a cut plain value does."""
    scrub = Scrubber([SECRET])
    assert scrub(f"out: {form[:20]}…") == f"out: {REDACTED}…"
    assert scrub(f"out: {form[:5]}") == f"out: {form[:5]}"
    assert scrub(f"out: {form[:20]} and more") == f"out: {form[:20]} and more"
