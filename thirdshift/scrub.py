"""Scrubbing: the one place secrets are taken out of text that leaves thirdshift.

Every outbound text (Session logs and events, preambles, prompts, pull request titles and bodies,
issue comments, Failed run records, progress lines, exception messages) goes through a
``Scrubber`` before it is written. It replaces with ``[REDACTED]``:

- the exact values of known secrets (the token, and environment variables whose names say they
  are secret), also JSON-escaped, and in each encoded form ``secret_forms`` derives from them
  (base64 in every alignment, base32, hex, percent-encoded, reversed: adr/0043);
- a prefix of ``MIN_CUT_PREFIX`` or more characters of a known value that ends the text
  (optionally before a ``…`` or ``...``): what is left of a secret in a line cut before it was
  scrubbed;
- credential shapes, known or not: provider tokens with a distinctive prefix (``_TOKENS``),
  private key blocks, JSON web tokens, and secrets named by their context (``_CONTEXTS``:
  ``Authorization`` headers, passwords in URLs and command lines, ``*_PASSWORD=``,
  ``client_secret:``, ``"api_key": "..."`` in env, YAML, JSON and TOML forms);
- a token cut short: one of the distinctive prefixes in ``_CUT_PREFIXES`` followed by
  ``MIN_CUT_PREFIX`` or more token characters up to the end of the text (or its ellipsis).

``Scrubber.findings`` names what it would remove (kind and span, never the value), for checks
that report secrets rather than remove them.

Where a secret may stand: in plain text, after a JSON escape (``\\n``, ``\\t``, ``\\"``,
``\\\\``) inside a Session log line, and in multi-line output. No value takes in a backslash or a
line break, so a secret never swallows the escaped newline (and the secret) after it; the one
exception is a private key block, which spans lines by nature and stops at the end of its JSON
string. A Session log line stays valid JSON once scrubbed.

What is not a secret (the false-positive policy): a value that refers to a secret instead of
holding it (``$VAR``, ``${VAR}``, ``%VAR%``, ``${{ secrets.X }}``, ``os.environ[...]``,
``getpass()``, ``self.password``, a path), a placeholder (``<your-token>``, ``changeme``,
``xxxx``, ``****``, ``[REDACTED]``, ``none``, ``example``...), a named value shorter than 4
characters, and hex digests, UUIDs and base64 data, which have no shape of their own: no entropy
test is made. An unquoted value given with ``:`` or `` = `` (YAML, ini, Python, prose) counts only
when it has a letter and a digit or a symbol (``hunter2``, not ``see``); quoted values, and
``NAME=value`` with an upper-case name (the environment's form), count as they are, except that
only a password's value may hold a space, and none begins or ends with one.

Its cost is linear in the text, whatever the text (agent output, issue bodies and comments all
pass through it): every repetition in a shape is bounded (no credential is longer than a few
kilobytes), a value named by its context is judged on its first kilobyte, and a token shape is not
tried again at an anchor inside the run its last try read. ``bench/scrub_floods.py`` measures the
worst case, a flood of a shape's own prefix.

About 770 lines: the table of shapes is one list, read and reviewed whole, and the search that
walks it belongs beside it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

from thirdshift.secret_forms import PERCENT, encoded_forms

REDACTED = "[REDACTED]"
KNOWN_VALUE = "known secret value"

# Environment variable names that hold secrets by convention.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|CREDENTIAL|PRIVATE", re.I
)
# Shorter values are too likely to occur in ordinary text to be replaced blindly.
_MIN_KNOWN_LENGTH = 8
# What is left at the end of a text of a known value, or after a token prefix, is removed from
# this many characters on.
MIN_CUT_PREFIX = 6
# What is left of a known value cut this short or shorter is found by one look-up of the text's
# last characters; a longer cut, of a long value, by a search.
_LONGEST_INDEXED_CUT = 256
# A value named by its context (assignment, header) is a secret from this length on.
_MIN_VALUE = 4
_ELLIPSES = ("…", "...")
# Scrubbing repeats until nothing changes, at most this many times.
_MAX_PASSES = 4
# No credential, and no value named by its context, is longer than this: every open repetition in
# a shape is bounded by it, so one try of a shape costs at most this much whatever follows.
_LONGEST_VALUE = 4096
# A private key block is longer (an 8192-bit RSA key is about 6.5 kB).
_LONGEST_KEY_BLOCK = 16384
# A value named by its context is read this far to judge it (it is tried at every key word, so
# this bounds what a flood of key words costs); one that goes on is redacted to its end.
_LONGEST_NAMED_VALUE = 1024


@dataclass(frozen=True)
class SecretFinding:
    """One secret in a text: the shape it has and where its value is (``text[start:end]``).
    Never the value itself."""

    kind: str
    start: int
    end: int


def looks_secret(name: str) -> bool:
    """Does an environment variable's name say it holds a secret?"""
    return bool(_SECRET_NAME.search(name))


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# -- what a value looks like ----------------------------------------------------------------------

_HEX = frozenset("0123456789abcdefABCDEF")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_PLACEHOLDER_WORDS = frozenset(
    _words(
        "admin apikey api_key api-key bar baz changeit changeme change_me change-me dummy empty"
        " example false foo foobar hidden masked nil none null optional pass passphrase passwd"
        " password placeholder redacted required sample secret str string tbd test todo token true"
        " undefined value"
    )
)
_PLACEHOLDER_STARTS = (
    *_words("your my- my_ example dummy placeholder changeme insert replace"),
    *_words("os.environ os.getenv process.env env. secrets. vars. settings. config."),
    *_words("http:// https://"),  # a URL's own credentials are the URL shape's
)
# How a reference or a placeholder starts: $VAR, ${VAR}, ${{ secrets.X }}, %VAR%, <your-token>,
# {{ var }}, {var}, [REDACTED]. (An unquoted value never starts with $ % * # ! @ = anyway.)
_REFERENCE = re.compile(r"\$[{\w]|%\w+%|<[^>]*>|\{\{|\{\w*\}\Z|\[redacted\]")
_LETTER = re.compile(r"[A-Za-z]")
_NOT_A_NAME = re.compile(r"[^A-Za-z_.\-]")  # a digit, or a symbol identifiers do not have
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-/]*")


def _starts_token(text: str, i: int) -> bool:
    """Does a token start at ``text[i]``: not inside a word, or right after a JSON escape such
    as the ``\\n`` of a tool's output quoted in a Session log line?"""
    if i == 0:
        return True
    before = text[i - 1]
    if not (before.isalnum() or before == "_"):
        return True
    if before in "nrtbf" and i >= 2 and text[i - 2] == "\\":
        return True
    return i >= 6 and text[i - 6 : i - 4] == "\\u" and all(c in _HEX for c in text[i - 4 : i])


def _placeholder(value: str, min_length: int = _MIN_VALUE) -> bool:
    """Does ``value`` stand for a secret without being one (or is it too short to tell)?"""
    lowered = value.strip().lower()
    if len(lowered) < min_length or _REFERENCE.match(lowered):
        return True
    if "redacted" in lowered or "xxxx" in lowered or "****" in lowered:
        return True
    if lowered in _PLACEHOLDER_WORDS or lowered.startswith(_PLACEHOLDER_STARTS):
        return True
    return len(lowered) >= _MIN_VALUE and len(set(lowered)) <= 2


def _looks_literal(value: str) -> bool:
    """An unquoted value in a loose form (``key: value``, ``key = value``) is a secret when it
    has a letter and a digit or a symbol, and is not a path."""
    return (
        _LETTER.search(value) is not None
        and _NOT_A_NAME.search(value) is not None
        and _PATH.fullmatch(value) is None
    )


def _cased(value: str) -> bool:
    """Random-looking: both upper and lower case (a slug or a snake_case name is not)."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


# -- shapes ----------------------------------------------------------------------------------------

_Hit = tuple[str, int, int]  # kind, start, end


@dataclass(frozen=True)
class _Shape:
    """One credential shape. Its pattern is matched where one of its ``anchors`` occurs (the text
    a match starts with), or, with ``scan``, searched in the whole text once an anchor occurs in
    it. A case-insensitive shape's anchors are lower case, looked for in the lowered text."""

    kind: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    scan: bool = False
    bounded: bool = True  # the match starts a token, never inside a word
    check: Callable[[str], bool] | None = None  # a further test of the value
    accept: Callable[[str, re.Match[str]], _Hit | None] | None = None  # replaces the tests
    # A test of the text before the anchor at ``i``, made before the pattern is tried (cheaper
    # than a match that is then refused).
    admit: Callable[[str, int], bool] | None = None

    @property
    def ignore_case(self) -> bool:
        return bool(self.pattern.flags & re.I)

    def hit(self, text: str, match: re.Match[str]) -> _Hit | None:
        if self.accept is not None:
            return self.accept(text, match)
        if self.bounded and not _starts_token(text, match.start()):
            return None
        if "rest" in self.pattern.groupindex and match.group("rest") is None:
            return None  # only the first part: matched so that the try has a reach
        start, end = match.span("v") if "v" in self.pattern.groupindex else match.span()
        if start >= end or (self.check is not None and not self.check(text[start:end])):
            return None
        return self.kind, start, end


_PEM_LABEL = r"-----{}[ A-Z0-9]{{0,64}}PRIVATE KEY(?: BLOCK)?-----"
# Without its END line, a block runs to the end of the text or of its JSON string.
_PEM = (
    rf"(?s){_PEM_LABEL.format('BEGIN')}(?:.{{0,{_LONGEST_KEY_BLOCK}}}?{_PEM_LABEL.format('END')}"
    rf"|(?:[^\"\\]|\\.){{0,{_LONGEST_KEY_BLOCK}}})"
)
_DATADOG = (
    r"(?i)(?:datadog|dd)[_-]?(?:api|app|application)[_-]?key(?:\\{0,8}[\"'])?[ \t]{0,}[:=][ \t]{0,}"
    r"(?:\\{0,8}[\"'])?(?P<v>[a-f0-9]{32}(?:[a-f0-9]{8})?)"
)
_AZURE_KEY = r"(?i)(?:Account|SharedAccess)Key[ \t]{0,}=[ \t]{0,}(?P<v>[\w+/]{40,}={0,2})"

# (kind, pattern, anchors, options), most specific first: where two findings overlap, the earlier
# shape names it. Patterns are ASCII: ``\w`` is [A-Za-z0-9_]. Every open repetition is written
# ``{m,}`` (never ``*`` or ``+``), read as ``{m,_LONGEST_VALUE}``. Options: "end" (no letter or
# digit may follow), "free" (may start inside a word), "scan" (search the text once an anchor
# occurs), "cased" (the value has upper and lower case). Group ``v``, if any, is the secret itself;
# group ``rest``, if any, must have matched (it is optional so that a refused try has a reach).
_TOKEN_TABLE: tuple[tuple[str, str, str, str], ...] = (
    ("private key block", _PEM, "-----BEGIN", "free"),
    ("age secret key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", "AGE-SECRET-KEY-1", ""),
    ("GitHub token", r"gh[pousr]_[^\W_]{30,}", "ghp_ gho_ ghu_ ghs_ ghr_", ""),
    ("GitHub token", r"github_pat_\w{22,}", "github_pat_", ""),
    ("Anthropic API key", r"sk-ant-[\w-]{20,}", "sk-ant-", ""),
    ("OpenAI API key", r"sk-(?:proj-|svcacct-|admin-)?[\w-]{20,}", "sk-", "cased"),
    ("AWS access key id", r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}", "AKIA ASIA ABIA ACCA", "end"),
    ("AWS session token", r"(?:IQoJb3JpZ2luX2Vj|FwoGZXIvYXdzE)[\w+/]{40,}={0,}", "IQoJ FwoG", ""),
    ("Slack token", r"xox[abposre]-[^\W_][\w-]{9,}|xapp-\d-[\w-]{10,}", "xox xapp-", ""),
    ("Slack webhook", r"hooks\.slack\.com/\w{1,}/(?P<v>[\w/-]{20,})", "hooks.slack.com/", "free"),
    ("Stripe key", r"[sr]k_(?:live|test)_[^\W_]{20,}", "sk_live_ rk_live_ sk_test_ rk_test_", ""),
    ("Stripe key", r"whsec_[^\W_]{24,}", "whsec_", ""),
    ("Square token", r"sq0(?:atp|csp)-[\w-]{22,}|EAAA[\w-]{60,}", "sq0atp- sq0csp- EAAA", ""),
    ("Braintree token", r"access_token\$(?:production|sandbox)\$\w{16}\$\w{32}", "access_", ""),
    ("Twilio key", r"(?:SK|AC)[0-9a-f]{32}", "SK AC", "end"),
    ("SendGrid API key", r"SG\.[\w-]{16,}\.[\w-]{16,}", "SG.", ""),
    ("Mailgun API key", r"key-[0-9a-f]{32}", "key-", "end"),
    ("Mailchimp API key", r"[0-9a-f]{32}-us\d{1,2}", "-us", "end scan"),
    ("npm token", r"npm_[^\W_]{36}", "npm_", "end"),
    ("PyPI token", r"pypi-AgE[\w-]{50,}", "pypi-AgE", ""),
    ("GitLab token", r"gl(?:pat|dt|rt|ptt|ft|imt|oas|cbt|soat|agent|ffct)-[\w.-]{20,}", "gl", ""),
    ("GitLab token", r"GR1348941[\w-]{20,}", "GR1348941", ""),
    ("DigitalOcean token", r"do[por]_v1_[a-f0-9]{64}", "dop_v1_ doo_v1_ dor_v1_", ""),
    ("Heroku API key", r"HRKU-[\w-]{20,}", "HRKU-", ""),
    ("Google API key", r"AIza[\w-]{35}(?![\w-])", "AIza", ""),
    ("Google OAuth credential", r"GOCSPX-[\w-]{20,}|ya29\.[\w-]{20,}", "GOCSPX- ya29.", ""),
    ("Hugging Face token", r"(?:hf_|api_org_)[^\W_]{30,}", "hf_ api_org_", "cased"),
    ("Databricks token", r"dapi[a-f0-9]{32}(?:-\d)?", "dapi", "end"),
    ("Shopify token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}", "shp", ""),
    ("Atlassian API token", r"ATATT3[\w=-]{60,}|ATBB[\w=.-]{28,}", "ATATT3 ATBB", ""),
    ("Linear API key", r"lin_(?:api|oauth)_[^\W_]{32,}", "lin_", ""),
    ("Notion token", r"secret_[^\W_]{43}", "secret_", "end cased"),
    ("Notion token", r"ntn_[^\W_]{40,}", "ntn_", ""),
    ("Doppler token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[^\W_]{40,}", "dp.", ""),
    ("Vault token", r"hv[sbr]\.[\w-]{24,}", "hvs. hvb. hvr.", ""),
    ("Pulumi access token", r"pul-[a-f0-9]{40}", "pul-", "end"),
    ("Postman API key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", "PMAK-", ""),
    ("Grafana token", r"glc_[\w+/]{32,}={0,2}|glsa_[^\W_]{32}_[a-fA-F0-9]{8}", "gl", ""),
    ("New Relic key", r"NR(?:AK|II|JS|AA|RA)-[^\W_]{19,}", "NR", ""),
    ("Sentry token", r"sntry[su]_[\w+/=-]{40,}", "sntry", ""),
    ("Sentry DSN", r"://(?P<v>[a-f0-9]{32})@[\w.-]{1,}/\d{1,}", "://", "free"),
    ("Mapbox secret token", r"sk\.eyJ[\w-]{20,}\.[\w-]{20,}", "sk.eyJ", ""),
    ("1Password service account token", r"ops_eyJ[\w+/=-]{100,}", "ops_eyJ", ""),
    ("JSON web token", r"eyJ[\w-]{10,}(?P<rest>\.eyJ[\w-]{10,}\.[\w-]{0,})?", "eyJ", ""),
    (
        "Discord webhook",
        r"discord(?:app)?\.com/api/webhooks/\d{1,}/(?P<v>[\w-]{40,})",
        "discord",
        "free",
    ),
    ("Docker Hub token", r"dckr_(?:pat|oat)_[\w-]{20,}", "dckr_", ""),
    ("Azure AD client secret", r"[\w~.]{3}\dQ~[\w~.-]{31,34}", "Q~", "scan"),
    ("Azure storage account key", _AZURE_KEY, "accountkey sharedaccesskey", "free"),
    ("Azure SAS signature", r"(?<=[?&;])sig=(?P<v>[\w%+/=]{20,})", "sig=", "free"),
    ("Datadog API key", _DATADOG, "datadog dd_ dd-", "end free scan"),
    ("Terraform Cloud token", r"[^\W_]{14}\.atlasv1\.[\w=-]{60,}", "atlasv1", "scan"),
    ("Supabase token", r"sbp_[a-f0-9]{40}", "sbp_", ""),
    ("PlanetScale token", r"pscale_(?:tkn|pw|oauth)_[\w.-]{32,}", "pscale_", ""),
    ("RubyGems API key", r"rubygems_[a-f0-9]{48}", "rubygems_", ""),
    ("Groq API key", r"gsk_[^\W_]{48,}", "gsk_", ""),
)


_OPEN_REPETITION = re.compile(r"\{(\d+),\}")


def _bounded(pattern: str, longest: int = _LONGEST_VALUE) -> str:
    """``pattern`` with every open repetition ``{m,}`` bounded by ``longest``."""
    return _OPEN_REPETITION.sub(rf"{{\1,{longest}}}", pattern)


def _shape(kind: str, pattern: str, anchors: str, options: str) -> _Shape:
    flags = options.split()
    return _Shape(
        kind,
        re.compile(_bounded(pattern) + (r"(?![A-Za-z0-9])" if "end" in flags else ""), re.A),
        tuple(anchors.split()),
        scan="scan" in flags,
        bounded="free" not in flags,
        check=_cased if "cased" in flags else None,
    )


_TOKENS = tuple(_shape(*row) for row in _TOKEN_TABLE)


# -- secrets named by their context ----------------------------------------------------------------

# key = value, key: value, "key": "value", key => value, --key value: matched at the word the key
# ends with. A value never takes in a backslash, a quote or a line break.
# The key word, ending the name: tried first on its own, as it is cheap.
_KEY_WORD = re.compile(r"(?:pass(?:word|wd|phrase)|pwd|secret|token|key)(?![A-Za-z0-9_.\-])", re.I)
_ASSIGNMENT = re.compile(
    _bounded(
        rf"(?P<word>{_KEY_WORD.pattern})"
        r"(?:\\{0,8}[\"'])?"
        r"(?P<sep>[ \t]{0,}(?::=|=>|=|:)[ \t]{0,}|[ \t]{1,})"
        r"(?:(?P<q>\\{0,8}[\"'`])(?P<quoted>[^\"'`\\\r\n]{1,})(?P=q)"
        # Not followed by ( { [ < >: a call or a template. A value cut at the bound goes on.
        r"|(?P<bare>[^\s\"'`\\,;&|(){}\[\]<>$%*#!@=][^\s\"'`\\,;&|(){}\[\]<>]{0,}+)"
        r"(?![({\[<>]))",
        _LONGEST_NAMED_VALUE,
    ),
    re.I,
)
# What a key ending in "key" ends with when it names a secret: api_key, privateKey, ...; matched
# backwards from the key word (one try where a search would try every place before it).
_KEY_QUALIFIERS = _words(
    "api private secret access auth signing encryption master account app consumer client license"
    " session webhook"
)
_KEY_QUALIFIER_BACKWARDS = re.compile(
    r"[_.\-]?(?:" + "|".join(word[::-1] for word in _KEY_QUALIFIERS) + ")", re.I
)
_ASSIGNMENT_KINDS = {
    "pass": "generic password assignment",
    "pwd": "generic password assignment",
    "secret": "generic secret assignment",
    "token": "generic token assignment",
    "key": "generic API key assignment",
}
# What a named value cut at its bound is read on through: what none of them stops at.
_NAMED_VALUE_RUN = re.compile(r"[^\s\"'`\\,;&|(){}\[\]<>]*")
_AUTH_SCHEMES = frozenset(_words("bearer token basic digest bot apikey negotiate"))


def _name_start(text: str, i: int) -> int:
    """Where the key whose last word is at ``i`` starts (after a JSON escape)."""
    j = i
    while j > 0 and text[j - 1] in _NAME_CHARS:
        j -= 1
    if 0 < j < i and text[j - 1] == "\\" and text[j] in "nrtbf":
        j += 1
    return j


def _assignment_admits(text: str, i: int) -> bool:
    """The tests of the key word at ``i`` that need no value: made before the value is read."""
    if _KEY_WORD.match(text, i) is None:
        return False
    word = text[i : i + 3]
    if word.lower() == "pwd":
        # PWD and OLDPWD are directories; MYSQL_PWD and ADO's Pwd= are passwords.
        return text[i - 1 : i] in ("_", "-") or word == "Pwd"
    if word.lower() == "key":
        before = text[max(0, i - 16) : i][::-1]
        return _KEY_QUALIFIER_BACKWARDS.match(before) is not None
    return True


def _assignment(text: str, m: re.Match[str]) -> _Hit | None:
    word = m.group("word")
    lowered = word.lower()
    i = m.start()
    start = _name_start(text, i)
    name = text[start : m.end("word")]
    # A path (/etc/passwd:), a shell reference ($DB_PASSWORD, ${DB_PASSWORD:-x}), %VAR%.
    if text[start - 1 : start] in ("/", "$", "%") or text[max(0, start - 2) : start] == "${":
        return None
    sep = m.group("sep")
    if not sep.strip() and not (name.startswith("--") or lowered.startswith("pass")):
        return None  # "key value" only for --flags and netrc's "password value"
    quoted = m.group("quoted")
    value = quoted if quoted is not None else m.group("bare")
    if _placeholder(value) or value != value.strip():
        return None
    if not lowered.startswith("pass") and any(c.isspace() for c in value):
        return None  # prose; only a passphrase has spaces
    strong = quoted is not None or (sep == "=" and name.isupper())
    if not strong and not _looks_literal(value):
        return None
    kind = _ASSIGNMENT_KINDS["pass" if lowered.startswith("pass") else lowered]
    return kind, *m.span("quoted" if quoted is not None else "bare")


def _authorization(text: str, m: re.Match[str]) -> _Hit | None:
    value = m.group("v")
    if value.lower() in _AUTH_SCHEMES or _placeholder(value):
        return None
    return "authorization header", *m.span("v")


def _loose(kind: str) -> Callable[[str, re.Match[str]], _Hit | None]:
    """A value that starts a token and looks literal, after ``bearer`` or ``-u user:``."""

    def accept(text: str, m: re.Match[str]) -> _Hit | None:
        value = m.group("v")
        if not _starts_token(text, m.start()) or _placeholder(value):
            return None
        return (kind, *m.span("v")) if _looks_literal(value) else None

    return accept


def _url_password(text: str, m: re.Match[str]) -> _Hit | None:
    if _placeholder(m.group("v"), min_length=1):
        return None
    return "credentials in a URL", *m.span("v")


_CONTEXTS: tuple[_Shape, ...] = (
    _Shape(
        "authorization header",
        re.compile(
            _bounded(
                r"authorization(?:\\{0,8}[\"'])?[ \t]{0,}[:=][ \t]{0,}(?:\\{0,8}[\"'])?[ \t]{0,}"
                r"(?:(?:bearer|token|basic|digest|bot|apikey|negotiate)[ \t]{1,})?"
                r"(?P<v>[A-Za-z0-9._~+/=:%\-]{6,})",
                _LONGEST_NAMED_VALUE,
            ),
            re.I,
        ),
        ("authorization",),
        accept=_authorization,
    ),
    _Shape(
        "bearer token",
        re.compile(
            _bounded(r"bearer[ \t]{1,}(?P<v>[A-Za-z0-9._~+/\-]{8,}={0,})", _LONGEST_NAMED_VALUE),
            re.I,
        ),
        ("bearer",),
        accept=_loose("bearer token"),
    ),
    _Shape(
        "credentials in a URL",
        re.compile(
            _bounded(
                r"(?<=[A-Za-z0-9])://[^\s/:@\"'\\<>]{0,}:(?P<v>[^\s/\"'\\<>]{1,})@(?=[A-Za-z0-9\[])",
                _LONGEST_NAMED_VALUE,
            )
        ),
        ("://",),
        accept=_url_password,
    ),
    _Shape(
        "credentials in a command line",
        re.compile(
            _bounded(
                r"-u(?:ser)?[ \t]{1,}[\"']?[^\s:\"'\\]{1,}:(?P<v>[^\s\"'\\]{1,})",
                _LONGEST_NAMED_VALUE,
            )
        ),
        ("-u",),
        accept=_loose("credentials in a command line"),
    ),
    _Shape(
        "generic assignment",
        _ASSIGNMENT,
        ("passw", "passphrase", "pwd", "secret", "token", "key"),
        accept=_assignment,
        admit=_assignment_admits,
    ),
)

# A token cut short at the end of a text: one of these prefixes (distinctive: ordinary words do
# not start so) and MIN_CUT_PREFIX or more token characters after it.
_CUT_TABLE = (
    ("GitHub token", "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_"),
    ("Anthropic API key", "sk-ant-"),
    ("OpenAI API key", "sk-proj- sk-svcacct- sk-admin-"),
    ("AWS access key id", "AKIA ASIA"),
    ("AWS session token", "IQoJb3JpZ2luX2Vj FwoGZXIvYXdzE"),
    ("Slack token", "xoxa- xoxb- xoxe- xoxo- xoxp- xoxr- xoxs- xapp-"),
    ("Stripe key", "sk_live_ rk_live_ sk_test_ rk_test_ whsec_"),
    ("Square token", "sq0atp- sq0csp-"),
    ("SendGrid API key", "SG."),
    ("npm token", "npm_"),
    ("PyPI token", "pypi-AgE"),
    ("GitLab token", "glpat- gldt- glrt- glptt- glft- glsoat-"),
    ("DigitalOcean token", "dop_v1_ doo_v1_ dor_v1_"),
    ("Heroku API key", "HRKU-"),
    ("Google API key", "AIza"),
    ("Google OAuth credential", "GOCSPX-"),
    ("Shopify token", "shpat_ shpss_ shpca_ shppa_"),
    ("Atlassian API token", "ATATT3"),
    ("Linear API key", "lin_api_"),
    ("Notion token", "ntn_"),
    ("Doppler token", "dp.pt. dp.st. dp.sa. dp.ct."),
    ("Vault token", "hvs. hvb."),
    ("Postman API key", "PMAK-"),
    ("Grafana token", "glc_ glsa_"),
    ("New Relic key", "NRAK-"),
    ("Sentry token", "sntrys_ sntryu_"),
    ("age secret key", "AGE-SECRET-KEY-1"),
    ("JSON web token", "eyJ"),
    ("Docker Hub token", "dckr_pat_"),
    ("PlanetScale token", "pscale_tkn_"),
)
_CUT_PREFIXES = {prefix: kind for kind, prefixes in _CUT_TABLE for prefix in prefixes.split()}
_CUT_PREFIX = re.compile("|".join(map(re.escape, sorted(_CUT_PREFIXES, key=len, reverse=True))))
_RUN = re.compile(r"[A-Za-z0-9_.\-]*")  # the token characters of a cut run, read backwards
_LONGEST_RUN = 512


def _alternatives(words: Iterable[str]) -> str:
    """A pattern for any of ``words``, grouped by first character (cheaper for ``re``)."""
    groups: dict[str, list[str]] = {}
    for word in sorted(set(words), key=len, reverse=True):
        groups.setdefault(word[0], []).append(re.escape(word[1:]))
    return "|".join(f"{re.escape(first)}(?:{'|'.join(rest)})" for first, rest in groups.items())


def _at_word_start(shape: _Shape) -> bool:
    """Is ``shape`` looked for where one of its anchors starts a word?"""
    return shape.bounded and not shape.scan and not shape.ignore_case


# Priorities: where findings overlap, the lowest names the secret. A token shape's is its place in
# the table, then come known values, the contexts in order, and a token cut short.
_KNOWN = len(_TOKENS)
_RANKED = (*enumerate(_TOKENS), *((_KNOWN + 1 + i, shape) for i, shape in enumerate(_CONTEXTS)))
_CUT = _KNOWN + 1 + len(_CONTEXTS)

# Token shapes are found in one pass: where an anchor starts a word or follows a JSON escape.
_STARTS = _alternatives(a for shape in _TOKENS if _at_word_start(shape) for a in shape.anchors)
_AT_WORD_START = re.compile(rf"(?<![A-Za-z0-9_])(?P<a>{_STARTS})")
_AFTER_ESCAPE = re.compile(rf"\\(?:[nrtbf]|u[0-9a-fA-F]{{4}})(?P<a>{_STARTS})")
# The alternation takes the longest anchor present; those it starts with are present too.
_WORD_START_TOKENS = tuple(
    (anchor, shape, rank)
    for rank, shape in enumerate(_TOKENS)
    if _at_word_start(shape)
    for anchor in shape.anchors
)
_BY_ANCHOR = {
    longest: tuple(
        (rank, shape) for anchor, shape, rank in _WORD_START_TOKENS if longest.startswith(anchor)
    )
    for longest, _, _ in _WORD_START_TOKENS
}
# The other shapes, each wherever its anchors occur; and those searched whole.
_ANCHORED = tuple(
    (anchor, shape.ignore_case, shape, rank)
    for rank, shape in _RANKED
    if not shape.scan and not (rank < _KNOWN and _at_word_start(shape))
    for anchor in shape.anchors
)
_SCANNED = tuple((shape.ignore_case, shape, rank) for rank, shape in _RANKED if shape.scan)

_Candidate = tuple[int, int, int, str]  # priority, start, end, kind


def shape_prefixes() -> tuple[tuple[str, str], ...]:
    """Every shape the scrubber knows, as (kind, prefix) for each text a match of it starts
    with (its anchors, and the prefixes of a token cut short): what a flood aimed at it repeats."""
    pairs = {
        *((shape.kind, anchor) for _, shape in _RANKED for anchor in shape.anchors),
        *((kind, prefix) for prefix, kind in _CUT_PREFIXES.items()),
    }
    return tuple(sorted(pairs))


_Known = tuple[tuple[str, str], ...]
_Cuts = dict[str, list[tuple[str, str, int]]]


@functools.lru_cache(maxsize=16)
def _tables(values: tuple[str, ...]) -> tuple[_Known, _Cuts, _Known]:
    """What a scrubber of ``values`` searches for: each text and the kind of finding it makes
    (longest first), the values cut short indexed by how they end, and the texts too long to
    index. Made once per set of values in a process (read only after): a Run, each of its
    adapters and each session build scrubbers of the same secrets, and the encoded forms of a
    private key take a tenth of a second to derive."""
    # The plain values first: a text that is one secret's value and another's encoded form is
    # named the value.
    kinds: dict[str, str] = {}
    for value in values:
        kinds.setdefault(value, KNOWN_VALUE)
        kinds.setdefault(json.dumps(value)[1:-1], KNOWN_VALUE)  # inside a JSON string
    for value in values:
        kinds.setdefault(quote(value, safe=""), f"{KNOWN_VALUE}, {PERCENT}")
        # Derived here, once: the scrubber then reads each text once per form (adr/0043).
        for form in encoded_forms(value):
            kinds.setdefault(form.text, f"{KNOWN_VALUE}, {form.encoding}")
    known = tuple(sorted(kinds.items(), key=lambda item: len(item[0]), reverse=True))
    # Each value cut short (MIN_CUT_PREFIX characters or more, never whole), by how it ends; a
    # cut further into a long value (a private key, its encodings) is searched for instead:
    # indexed, it would take a dictionary entry a character.
    cuts: _Cuts = {}
    long = tuple((v, k) for v, k in known if len(v) > _LONGEST_INDEXED_CUT)
    for value, kind in known:
        for length in range(MIN_CUT_PREFIX, min(len(value), _LONGEST_INDEXED_CUT + 1)):
            ending = value[length - MIN_CUT_PREFIX : length]
            cuts.setdefault(ending, []).append((value, kind, length))
    return known, cuts, long


class Scrubber:
    """Replaces secrets in text with ``[REDACTED]``. Build it once, at the composition root,
    with every secret value thirdshift knows; it is cheap to call on every line."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = [s for s in (secret.strip() for secret in secrets) if len(s) >= _MIN_KNOWN_LENGTH]
        self._known, self._cuts, self._long = _tables(tuple(dict.fromkeys(values)))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Scrubber:
        """A scrubber that knows ``extra`` and the value of every variable whose name says it is
        secret (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``, ...)."""
        found = [value for name, value in environ.items() if looks_secret(name)]
        return cls([*found, *extra])

    def __call__(self, text: str) -> str:
        """``text`` with every secret in it replaced by ``[REDACTED]``."""
        # Once a secret is out, what stood around it may make another one recognisable (a flag
        # now at a word start, a token now at the end): scrub again until nothing changes.
        for _ in range(_MAX_PASSES):
            scrubbed = self._once(text)
            if scrubbed == text:
                break
            text = scrubbed
        return text

    def _once(self, text: str) -> str:
        spans = sorted((start, end) for _, start, end, _ in self._candidates(text))
        if not spans:
            return text
        parts: list[str] = []
        done = 0
        for start, end in spans:
            if end <= done:
                continue
            # Never split a JSON escape: take its backslash, or the character it escapes.
            if start > done:
                start -= _escaping(text, start)
            if end < len(text):
                end += _escaping(text, end)
            if start >= done:
                parts += (text[done:start], REDACTED)
            done = end
        parts.append(text[done:])
        return "".join(parts)

    def findings(self, text: str) -> tuple[SecretFinding, ...]:
        """Every secret in ``text``: its kind and the span of its value, in text order. Where
        findings overlap, the most specific names the secret: a provider's token shape, then a
        known value, then the context it stands in, then a token cut short."""
        chosen: list[tuple[int, int, str]] = []
        for _, start, end, kind in sorted(self._candidates(text)):
            if all(end <= s or start >= e for s, e, _ in chosen):
                chosen.append((start, end, kind))
        return tuple(SecretFinding(kind, start, end) for start, end, kind in sorted(chosen))

    def _candidates(self, text: str) -> list[_Candidate]:
        """Everything that may be a secret in ``text``, overlaps included."""
        found: list[_Candidate] = []
        if not text:
            return found
        lowered = _lowered(text)
        # How far each token shape's last match reached. An anchor inside it starts a run already
        # read: the match from there would be the rest of the same run, taken (a part of a hit)
        # or refused (it fails every test the whole failed) alike, so it is not tried again. This
        # keeps a flood of a shape's own prefix (sk-sk-sk-...) linear instead of quadratic.
        reach: dict[int, int] = {}
        for starts in (_AT_WORD_START.finditer(text), _AFTER_ESCAPE.finditer(text)):
            for start in starts:
                i = start.start("a")
                for rank, shape in _BY_ANCHOR[start.group("a")]:
                    if i < reach.get(rank, 0):
                        continue
                    match = shape.pattern.match(text, i)
                    if match is None:
                        continue
                    reach[rank] = match.end()
                    hit = shape.hit(text, match)
                    if hit is not None:
                        found.append((rank, hit[1], hit[2], hit[0]))
        for anchor, ignore_case, shape, priority in _ANCHORED:
            hay = lowered if ignore_case else text
            i = hay.find(anchor)
            while i >= 0:
                if shape.admit is not None and not shape.admit(text, i):
                    i = hay.find(anchor, i + 1)
                    continue
                match = shape.pattern.match(text, i)
                hit = shape.hit(text, match) if match is not None else None
                if hit is not None:
                    if priority > _KNOWN and hit[2] - hit[1] >= _LONGEST_NAMED_VALUE:
                        hit = (hit[0], hit[1], _end_of_named_value(text, hit[2]))
                    found.append((priority, hit[1], hit[2], hit[0]))
                i = hay.find(anchor, i + 1 if hit is None else max(hit[2], i + 1))
        for ignore_case, shape, priority in _SCANNED:
            hay = lowered if ignore_case else text
            if any(map(hay.__contains__, shape.anchors)):
                for match in shape.pattern.finditer(text):
                    hit = shape.hit(text, match)
                    if hit is not None:
                        found.append((priority, hit[1], hit[2], hit[0]))
        end = _end_of_text(text)
        if self._known:
            found += self._known_spans(text, end)
        cut = _cut_token(text, end)
        if cut is not None:
            found.append((_CUT, *cut))
        return found

    def _known_spans(self, text: str, end: int) -> list[_Candidate]:
        """Known values, and what is left of one at ``end``, where the text ends."""
        spans: list[_Candidate] = []
        for value, kind in self._known:
            i = text.find(value)
            while i >= 0:
                spans.append((_KNOWN, i, i + len(value), kind))
                i = text.find(value, i + len(value))
        # What is left of a value at the end of a text cut inside it: the text's last
        # MIN_CUT_PREFIX characters, looked up once, name the cuts that may end there.
        cut: dict[str, tuple[int, str]] = {}
        for value, kind, length in self._cuts.get(text[max(0, end - MIN_CUT_PREFIX) : end], ()):
            longer = length <= end and length > cut.get(value, (0, ""))[0]
            if longer and text.startswith(value[:length], end - length):
                cut[value] = (length, kind)
        spans += ((_KNOWN, end - length, end, kind) for length, kind in cut.values())
        # A cut longer than the index holds: where the value's head starts it.
        stop = end - _LONGEST_INDEXED_CUT + MIN_CUT_PREFIX
        for value, kind in self._long if stop > 0 else ():
            head = value[:MIN_CUT_PREFIX]
            i = text.find(head, max(0, end - len(value) + 1), stop)
            while i >= 0:
                if value.startswith(text[i:end]):
                    spans.append((_KNOWN, i, end, kind))
                    break
                i = text.find(head, i + 1, stop)
        return spans


def _end_of_named_value(text: str, cut: int) -> int:
    """Where a named value read only to ``cut`` (its bound) ends."""
    run = _NAMED_VALUE_RUN.match(text, cut)
    return cut if run is None else run.end()


def _escaping(text: str, start: int) -> int:
    """1 if ``text[start]`` is escaped by the backslash before it, else 0."""
    i = start
    while i > 0 and text[i - 1] == "\\":
        i -= 1
    return (start - i) % 2


def _lowered(text: str) -> str:
    """``text`` in lower case, character for character (so that positions stay valid)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _end_of_text(text: str) -> int:
    """Where the text ends, before a trailing ellipsis."""
    for ellipsis in _ELLIPSES:
        if text.endswith(ellipsis):
            return len(text) - len(ellipsis)
    return len(text)


def _cut_token(text: str, end: int) -> tuple[int, int, str] | None:
    """A token with a distinctive prefix cut short at ``end``, where the text ends: its span and
    kind."""
    if end == 0 or text[end - 1] not in _NAME_CHARS:
        return None
    run = _RUN.match(text[max(0, end - _LONGEST_RUN) : end][::-1])
    start = end - (run.end() if run is not None else 0)
    if 0 < start < end and text[start - 1] == "\\" and text[start] in "nrtbf":
        start += 1  # the run began with a JSON escape's letter
    prefix = _CUT_PREFIX.match(text, start, end)
    if prefix is None or end - prefix.end() < MIN_CUT_PREFIX:
        return None
    return start, end, _CUT_PREFIXES[prefix.group()]
