"""Scrubbing: the one place secrets are taken out of text that leaves thirdshift.

Every outbound text (Session events, preambles, issue and pull request comments, Failed run
records, progress lines, exception messages) goes through a ``Scrubber`` before it is written.
It removes the exact values of known secrets (the token, and environment variables whose names
say they are secret) and anything shaped like a credential, whether we know its value or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote

REDACTED = "[REDACTED]"

# Environment variable names that hold secrets by convention.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|CREDENTIAL|PRIVATE", re.I
)
# Shorter values are too likely to occur in ordinary text to be replaced blindly.
_MIN_KNOWN_LENGTH = 8

# Where a token may start: not inside a word, or right after a JSON/C escape such as the "\n"
# of a tool's output quoted in a Session log line.
_START = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))"

_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # GitHub: classic, OAuth, user-to-server, server-to-server, refresh; fine-grained.
    (re.compile(_START + r"gh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(_START + r"github_pat_[A-Za-z0-9_]{20,}"), REDACTED),
    # Anthropic before OpenAI: both start with sk-.
    (re.compile(_START + r"sk-ant-[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(_START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), REDACTED),
    (re.compile(_START + r"(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (
        re.compile(r"(?i)(aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
        r"\1" + REDACTED,
    ),
    (re.compile(_START + r"xox[abposr]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"), REDACTED),
    # Authorization headers and bare bearer tokens.
    (
        re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?(?:bearer|token|basic)\s+)[^\s\"']+"),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"), r"\1" + REDACTED),
    # Credentials inside URLs: scheme://user:password@host
    (re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^/\s@]+@"), r"\1" + REDACTED + "@"),
)


def looks_secret(name: str) -> bool:
    """Does an environment variable's name say it holds a secret?"""
    return bool(_SECRET_NAME.search(name))


class Scrubber:
    """Replaces secrets in text with ``[REDACTED]``. Build it once, at the composition root,
    with every secret value thirdshift knows; it is cheap to call on every line."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values: set[str] = set()
        for secret in secrets:
            secret = secret.strip()
            if len(secret) < _MIN_KNOWN_LENGTH:
                continue
            values.add(secret)
            values.add(quote(secret, safe=""))
        # Longest first, so a secret that contains another is replaced whole.
        ordered = sorted(values, key=len, reverse=True)
        self._known = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Scrubber:
        """A scrubber that knows ``extra`` and the value of every variable whose name says it is
        secret (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``, ...)."""
        found = [value for name, value in environ.items() if looks_secret(name)]
        return cls([*found, *extra])

    def __call__(self, text: str) -> str:
        if self._known is not None:
            text = self._known.sub(REDACTED, text)
        for pattern, replacement in _SHAPES:
            text = pattern.sub(replacement, text)
        return text
