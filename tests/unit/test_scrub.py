"""Scrubbing: known secret values and credential shapes never leave thirdshift."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.support.secret_corpus import BENIGN, SECRETS, SecretSample, contexts, pieces
from thirdshift.scrub import REDACTED, Scrubber, SecretFinding

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


# -- the corpus -----------------------------------------------------------------------------------

# Shapes the corpus must hold: every one the attacker's review found passing through, and the
# common ones the published scanners know.
REQUIRED_SHAPES = {
    "AWS session token",
    "Stripe secret key",
    "Stripe restricted key",
    "SendGrid API key",
    "Twilio API key",
    "Twilio account SID",
    "npm token",
    "PyPI token",
    "GitLab personal access token",
    "Google API key",
    "Hugging Face token",
    "JSON web token",
    "Discord webhook",
    "Azure storage account key",
    "Datadog API key",
    "Mailgun API key",
    "Shopify token (shpat_)",
    "DB_PASSWORD assignment",
    "client_secret in YAML",
    "api_key in JSON",
    "GCP service account private key",
    "Slack webhook",
    "password in a postgres URL",
    "password in an ADO connection string",
}


def survivors(scrub: Scrubber, sample: SecretSample) -> list[str]:
    """Where some of the sample's value is still readable once each of its contexts is scrubbed."""
    found: list[str] = []
    for number, context in enumerate(contexts(sample)):
        scrubbed = scrub(context)
        readable = [scrubbed]
        if number == 1:  # the Session log line: still JSON, and its decoded content is clean too
            try:
                readable.append(json.loads(scrubbed)["content"])
            except ValueError:
                found.append(f"{sample.shape} (context {number}): no longer valid JSON")
        if any(piece in text for text in readable for piece in pieces(sample.value)):
            found.append(f"{sample.shape} (context {number}): {scrubbed[:160]!r}")
    return found


def test_every_corpus_secret_is_removed_in_every_context_and_benign_text_is_left_alone() -> None:
    """No 8-character piece of any corpus secret survives, plain, in JSON or in multi-line
    output; every benign string comes through unchanged."""
    scrub = Scrubber()
    left = [trace for sample in SECRETS for trace in survivors(scrub, sample)]
    changed = [f"{text!r} -> {scrub(text)!r}" for text in BENIGN if scrub(text) != text]
    checked = len(SECRETS) * len(contexts(SECRETS[0]))
    removed = checked - len({trace.split(":")[0] for trace in left})
    print(
        f"secrets: {removed} of {checked} removed ({len(SECRETS)} samples of "
        f"{len({s.shape for s in SECRETS})} shapes, {len(contexts(SECRETS[0]))} contexts each); "
        f"benign: {len(BENIGN) - len(changed)} of {len(BENIGN)} unchanged"
    )
    assert not left, "secrets that survived scrubbing:\n" + "\n".join(left)
    assert not changed, "benign text that was changed:\n" + "\n".join(changed)


def test_corpus_holds_every_required_shape_in_enough_samples() -> None:
    """At least 60 secrets of at least 40 shapes, every required shape, 30 benign strings."""
    shapes = {sample.shape for sample in SECRETS}
    assert len(SECRETS) >= 60
    assert len(shapes) >= 40
    assert shapes >= REQUIRED_SHAPES, REQUIRED_SHAPES - shapes
    assert len(BENIGN) >= 30
    assert all(len(sample.value) >= 8 for sample in SECRETS)


def test_scrubbing_the_corpus_is_idempotent() -> None:
    """Scrubbed text scrubs to itself, in every context."""
    scrub = Scrubber()
    for sample in SECRETS:
        for context in contexts(sample):
            once = scrub(context)
            assert scrub(once) == once, sample.shape


# -- contexts -------------------------------------------------------------------------------------


def test_bearer_value_stops_at_an_escaped_newline_so_the_next_header_is_scrubbed_too() -> None:
    """In a JSON-escaped log line, Bearer X\\nAuthorization: Basic Y loses both X and Y."""
    bearer, basic = "opaqueBearer0value9", "dXNlcjpwYXNzd29yZDE="
    line = json.dumps({"content": f"Authorization: Bearer {bearer}\nAuthorization: Basic {basic}"})
    assert "\\n" in line
    scrubbed = Scrubber()(line)
    assert bearer not in scrubbed
    assert basic not in scrubbed
    content = json.loads(scrubbed)["content"]
    assert content == f"Authorization: Bearer {REDACTED}\nAuthorization: Basic {REDACTED}"


def test_values_never_swallow_an_escaped_or_real_newline() -> None:
    """Each assignment on its own line, escaped or real, is redacted alone; the lines stay."""
    for newline in ("\\n", "\n", "\\r\\n"):
        text = f"DB_PASSWORD=Pa55-word-1{newline}API_TOKEN=abc123def456{newline}HOME=/srv"
        assert Scrubber()(text) == newline.join(
            [f"DB_PASSWORD={REDACTED}", f"API_TOKEN={REDACTED}", "HOME=/srv"]
        )


def test_tokens_after_json_escapes_are_redacted() -> None:
    """A token right after \\n, \\t, \\" or \\\\ in a JSON string is still a token."""
    for escape in ("\\n", "\\t", '\\"', "\\\\", "\\u2026"):
        line = '{"content":"x' + escape + GITHUB_CLASSIC + '"}'
        scrubbed = Scrubber()(line)
        assert GITHUB_CLASSIC not in scrubbed
        assert json.loads(scrubbed)


def test_references_and_placeholders_are_not_secrets() -> None:
    """$VAR, ${VAR}, os.environ[...], getpass(), <your-token>, changeme stay as they are."""
    for text in (
        "DB_PASSWORD=${DB_PASSWORD}",
        "export API_TOKEN=$CI_TOKEN",
        'password = os.environ["DB_PASSWORD"]',
        "secret = getpass()",
        "password = self.password",
        '"api_key": "<your-api-key>"',
        "client_secret: changeme",
        "API_KEY=xxxxxxxxxxxx",
        "private_key: ./keys/id_rsa",
        f"password: {REDACTED}",
    ):
        assert Scrubber()(text) == text


# -- known values and cuts ------------------------------------------------------------------------

KNOWN = "opaque-known-value-4f9c2b7e"


@pytest.mark.parametrize("ending", ["", "…", "..."])
def test_a_known_value_cut_at_the_end_of_a_text_is_removed(ending: str) -> None:
    """A text that ends in 6 or more characters of a known value (before an ellipsis) loses them."""
    scrub = Scrubber([KNOWN])
    for kept in (6, 12, len(KNOWN) - 1):
        assert scrub(f"$ echo {KNOWN[:kept]}{ending}") == f"$ echo {REDACTED}{ending}"


def test_a_long_known_value_cut_anywhere_at_the_end_of_a_text_is_removed() -> None:
    """A private key's worth of known value: a cut near its start and one far into it alike."""
    long_value = "".join(f"{i:04d}-opaque-" for i in range(60))  # 660 characters
    scrub = Scrubber([long_value])
    for kept in (6, 200, 256, 257, 300, len(long_value) - 1):
        assert scrub(f"key: {long_value[:kept]}…") == f"key: {REDACTED}…", kept
    assert scrub(f"key: {long_value[:400]} and more") == f"key: {long_value[:400]} and more"


def test_a_shorter_cut_or_a_prefix_inside_the_text_is_left_alone() -> None:
    """Five characters are too few to tell; a prefix that does not end the text is no cut."""
    scrub = Scrubber([KNOWN])
    assert scrub(f"$ echo {KNOWN[:5]}…") == f"$ echo {KNOWN[:5]}…"
    assert scrub(f"{KNOWN[:10]} and more") == f"{KNOWN[:10]} and more"


def test_known_values_are_redacted_json_escaped_too() -> None:
    """A known value with a quote or a backslash is found as it stands inside a JSON string."""
    value = 'quote"and\\backslash-secret'
    line = json.dumps({"content": f"echo {value}"})
    scrubbed = Scrubber([value])(line)
    assert json.loads(scrubbed) == {"content": f"echo {REDACTED}"}


@pytest.mark.parametrize(
    "prefix", ["ghp_", "github_pat_", "sk-ant-", "xoxb-", "glpat-", "AKIA", "npm_", "eyJ"]
)
def test_a_token_cut_short_at_the_end_of_a_text_is_removed(prefix: str) -> None:
    """A distinctive prefix and 6 or more token characters ending the text are a cut token; the
    same too short for the whole shape elsewhere in the text is not."""
    scrub = Scrubber()
    assert scrub(f"$ export T={prefix}Ab3dE6gH…") == f"$ export T={REDACTED}…"
    assert scrub(f"see {prefix}Ab3dE6gH") == f"see {REDACTED}"
    assert scrub(f"tokens start with {prefix}…") == f"tokens start with {prefix}…"
    assert scrub(f"{prefix}Ab3dE6gH in the middle") == f"{prefix}Ab3dE6gH in the middle"


# -- findings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        (f"token is {GITHUB_CLASSIC} ok", GITHUB_CLASSIC, "GitHub token"),
        (f"aws {AWS_ID} here", AWS_ID, "AWS access key id"),
        (f"before\n{PEM}\nafter", PEM, "private key block"),
        ("DB_PASSWORD=S3cure-Passw0rd!", "S3cure-Passw0rd!", "generic password assignment"),
        (f"echo {KNOWN} done", KNOWN, "known secret value"),
        ("postgres://app:Sup3rS3cret@db/app", "Sup3rS3cret", "credentials in a URL"),
    ],
)
def test_findings_name_the_kind_and_the_span_of_the_value(text: str, value: str, kind: str) -> None:
    """One finding: the kind of secret and exactly where its value is."""
    start = text.index(value)
    found = Scrubber([KNOWN]).findings(text)
    assert found == (SecretFinding(kind, start, start + len(value)),)
    assert value not in repr(found)


def test_findings_prefer_the_provider_shape_over_the_context_it_stands_in() -> None:
    """GH_TOKEN=ghp_... is a GitHub token, not a generic token assignment; known or not."""
    text = f"GH_TOKEN={GITHUB_CLASSIC}"
    assert [f.kind for f in Scrubber().findings(text)] == ["GitHub token"]
    assert [f.kind for f in Scrubber([GITHUB_CLASSIC]).findings(text)] == ["GitHub token"]


def test_findings_cover_every_corpus_secret_and_nothing_in_benign_text() -> None:
    """Every character of every corpus value lies in a finding; benign text has none."""
    scrub = Scrubber()
    for sample in SECRETS:
        start = sample.text.index(sample.value)
        covered: set[int] = set()
        for finding in scrub.findings(sample.text):
            covered.update(range(finding.start, finding.end))
        assert set(range(start, start + len(sample.value))) <= covered, sample.shape
    assert [text for text in BENIGN if scrub.findings(text)] == []


def test_findings_are_in_text_order_and_never_overlap() -> None:
    """Several secrets on one line: one finding each, left to right."""
    text = f"{AWS_ID} {GITHUB_CLASSIC} password=Pa55w0rd-x {SLACK}"
    found = Scrubber().findings(text)
    assert [f.kind for f in found] == [
        "AWS access key id",
        "GitHub token",
        "generic password assignment",
        "Slack token",
    ]
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
