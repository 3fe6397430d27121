"""Scrubbing: known secret values and credential shapes never leave thirdshift."""

from __future__ import annotations

import pytest

from thirdshift.scrub import REDACTED, Scrubber

# Fake credentials assembled at run time, so the source holds no token-shaped literal.
GITHUB_CLASSIC = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"
ANTHROPIC = "sk-ant-api03-" + "Zx9" * 12
OPENAI = "sk-proj-" + "Qw8" * 12
AWS_ID = "AKIA" + "ABCDEFGHIJKLMNOP"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
SLACK = "xoxb-" + "123456789012-abcdefghijkl"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"token is {GITHUB_CLASSIC} ok", GITHUB_CLASSIC),
        (f"export GH={GITHUB_FINE}", GITHUB_FINE),
        (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
        (f"key: {OPENAI}", OPENAI),
        (f"aws {AWS_ID} here", AWS_ID),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
        (f"slack {SLACK}", SLACK),
        (f"before\n{PEM}\nafter", "MIIEow"),
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("authorization: token 0123456789abcdef", "0123456789abcdef"),
        ("curl -H 'bearer s3cr3tvalue99'", "s3cr3tvalue99"),
        ("git clone https://x-access-token:hunter2hunter2@github.com/o/r.git", "hunter2hunter2"),
    ],
)
def test_credential_shapes_are_redacted(text: str, secret: str) -> None:
    """Anything shaped like a credential is replaced, known or not."""
    scrubbed = Scrubber()(text)
    assert secret not in scrubbed
    assert REDACTED in scrubbed


def test_known_values_are_redacted_wherever_they_appear() -> None:
    """A secret with no recognisable shape is removed by value, also URL-encoded."""
    scrub = Scrubber(["plain-looking-secret/value"])
    text = "a plain-looking-secret/value and plain-looking-secret%2Fvalue"
    assert scrub(text) == f"a {REDACTED} and {REDACTED}"


def test_secrets_are_found_by_their_variable_names() -> None:
    """Values of *TOKEN*, *SECRET*, *PASSWORD*, *API_KEY* variables are known secrets."""
    scrub = Scrubber.from_environment(
        {"MY_SERVICE_TOKEN": "opaque-value-1", "DB_PASSWORD": "opaque-value-2", "HOME": "/root"}
    )
    assert scrub("opaque-value-1 opaque-value-2 /root") == f"{REDACTED} {REDACTED} /root"


def test_ordinary_text_is_left_alone() -> None:
    """Commit shas, paths, short values and prose pass through unchanged."""
    scrub = Scrubber(["short"])
    text = "CI passed on 3f2a9c1b7e; see src/app.py and https://example.com/o/r/pull/3 (short)"
    assert scrub(text) == text


def test_scrubbing_is_idempotent() -> None:
    """Scrubbed text scrubs to itself."""
    scrub = Scrubber([GITHUB_CLASSIC])
    once = scrub(f"{GITHUB_CLASSIC} Authorization: Bearer abcdefgh12345")
    assert scrub(once) == once


def test_tokens_inside_json_escaped_output_are_redacted() -> None:
    """A token printed by a tool lands in a Session log line after a JSON "\\n" escape."""
    line = '{"content":"exit code 1\\n' + GITHUB_CLASSIC + "\\t" + OPENAI + '"}'
    scrubbed = Scrubber()(line)
    assert GITHUB_CLASSIC not in scrubbed
    assert OPENAI not in scrubbed


def test_words_that_merely_contain_a_prefix_are_left_alone() -> None:
    """'risk-assessment-...' is not an OpenAI key."""
    text = "see the risk-assessment-document-for-2026 and the task-scheduler-configuration"
    assert Scrubber()(text) == text
