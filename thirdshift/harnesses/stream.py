"""Helpers the Harness adapters share: the environment allowlist and the configuration a private
home is given, an argv's optional parts, decoding one stream line safely, and condensing what it
says.

A reader never raises on input. ``decode`` turns one stdout line into a JSON object or None
(empty, not JSON, not an object, not UTF-8, or longer than ``MAX_PARSED_LINE``); the rest of this
module makes the short texts that progress lines and Session events carry.

Scrub first, then cut: the helpers that shorten a text take the reader's ``scrub`` and apply it
before they cut, so a secret that straddles the cut is removed whole instead of leaving its first
characters behind. Of a long text only the head is scrubbed, ``SCRUB_MARGIN`` characters past the
cut: every token shape is recognisable within that many characters, and what runs longer (a
private key block, a known value) the scrubber also removes when it is cut off at the end of the
text it is given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from thirdshift.errors import ThirdshiftError
from thirdshift.network import HostPattern, endpoint_of_url, parse_host_pattern
from thirdshift.records import SessionEvent

# A line longer than this is never handed to json.loads: the reader skips it. Real lines reach a
# few hundred KB (whole files in tool results); 8 MiB keeps a runaway line from costing the
# daemon more than a bounded amount of memory and time. The process supervisor cuts a line over
# ``session_line_cap_bytes`` before any reader sees it; this holds whatever that setting says.
MAX_PARSED_LINE = 8 * 1024 * 1024

DETAIL_LIMIT = 100  # the detail of a progress line
SUMMARY_LIMIT = 200  # the summary of a Session event
TARGET_LIMIT = 2000  # the target (command or path) of a Session event
ELLIPSIS = "…"
# How far past the cut a long text is scrubbed before it is cut.
SCRUB_MARGIN = 256

# The HTTP statuses of a provider that is down or rate-limited, as opposed to a bad request: a
# session that fails on one of them after the CLI's own retries is a provider outage.
OUTAGE_STATUSES = frozenset({429, 503, 529})

# Takes the secrets out of a text (thirdshift.scrub.Scrubber, given by the caller).
Scrub = Callable[[str], str]

# How much of a text ``first_line`` looks at in one go.
_WINDOW = 4096
_NON_BLANK = re.compile(r"\S")
# Shells whose ``-c``/``-lc`` wrapper is peeled off a command before it is shown.
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_WRAPPED = re.compile(r"(?:\S*/)?(?:bash|sh|zsh|dash)\s+-(?:c|lc|cl)\s")
_SINGLE_QUOTED = re.compile(
    r"(?:\S*/)?(?:bash|sh|zsh|dash)\s+-(?:c|lc|cl)\s+'((?:[^']|'\\'')*)'", re.DOTALL
)
# Characters that separate the simple commands of one shell line.
_SEPARATORS = re.compile(r"&&|\|\||[;|&\n()]")
# git's global options that take a value as the next word.
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


# What every agent CLI may see of the daemon's environment: where programs and home are, the
# locale, the terminal and temp dir, and git's identity and configuration (the agent commits).
COMMON_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "TZ",
        "TMPDIR",
        "TERM",
        "SHELL",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
    }
)
COMMON_PREFIXES = ("LC_",)
# Never handed to an agent, whatever an allowlist says: thirdshift pushes, the agent needs no
# GitHub credentials, and thirdshift's own settings are none of its business. The status page's
# token and the database's URL are named too, so that not even a provider's ``env_key`` in the
# options passes them: with either, an agent reads or writes what the daemon knows.
FORBIDDEN_VARIABLES = frozenset(
    {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "THIRDSHIFT_HTTP_TOKEN",
        "THIRDSHIFT_WEBHOOK_SECRET",
        "THIRDSHIFT_DATABASE_URL",
    }
)
FORBIDDEN_PREFIX = "THIRDSHIFT_"


def allowlisted(
    base: Mapping[str, str],
    names: Iterable[str],
    prefixes: Iterable[str] = (),
    *,
    also: Iterable[str] = (),
) -> dict[str, str]:
    """The variables of ``base`` named in ``COMMON_VARIABLES`` or ``names``, or starting with a
    common prefix or one of ``prefixes``. ``also`` names variables the caller's own
    configuration asks for (a model provider's key variable) and may be ``THIRDSHIFT_*``; a GitHub
    token never passes."""
    wanted = COMMON_VARIABLES | frozenset(names)
    starts = (*COMMON_PREFIXES, *prefixes)
    explicit = frozenset(also) - FORBIDDEN_VARIABLES
    return {
        key: value
        for key, value in base.items()
        if key in explicit
        or (
            (key in wanted or key.startswith(starts))
            and key not in FORBIDDEN_VARIABLES
            and not key.startswith(FORBIDDEN_PREFIX)
        )
    }


def option(name: str, value: str | None) -> list[str]:
    """``[name, value]`` for an argv, or nothing when there is no value (no model asked for,
    no session resumed)."""
    return [name, value] if value else []


def decode(line: bytes) -> dict[str, Any] | None:
    """The JSON object on ``line``, or None for anything else. Never raises."""
    if len(line) > MAX_PARSED_LINE or not line[:64].lstrip().startswith(b"{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    return value if isinstance(value, dict) else None


def cut(text: str, limit: int = DETAIL_LIMIT, scrub: Scrub | None = None) -> str:
    """``text`` if it fits in ``limit`` characters, else its start and an ellipsis (``limit``
    characters in all). With ``scrub``, the text is scrubbed before it is cut."""
    return _cut(text, limit, scrub)[0]


def _cut(text: str, limit: int, scrub: Scrub | None) -> tuple[str, bool]:
    """The cut text, and whether anything was cut off."""
    if scrub is not None:
        window = limit + SCRUB_MARGIN
        if len(text) > window:
            return scrub(text[:window])[: limit - 1] + ELLIPSIS, True
        text = scrub(text)
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + ELLIPSIS, True


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped; empty for blank text."""
    return _head(text)[0]


def one_line(text: str, limit: int = SUMMARY_LIMIT, scrub: Scrub | None = None) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` (scrubbed first, with ``scrub``);
    a multi-line text is marked with an ellipsis even when its first line fits."""
    line, more = _head(text)
    shown, was_cut = _cut(line, limit, scrub)
    if more and not was_cut and len(shown) < limit:
        return shown + ELLIPSIS
    return shown


def _head(text: str) -> tuple[str, bool]:
    """The first non-blank line and whether anything non-blank follows it. Looks at a window
    at a time, so a huge tool output costs no more than its first lines."""
    start = 0
    while start < len(text):
        window = text[start : start + _WINDOW]
        lines = window.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped:
                more = any(rest.strip() for rest in lines[i + 1 :]) or (
                    _NON_BLANK.search(text, start + len(window)) is not None
                )
                if (
                    i == len(lines) - 1
                    and start + len(window) < len(text)
                    and window[-1:]
                    not in (
                        "\n",
                        "\r",
                    )
                ):
                    # The line runs past the window: read it whole.
                    end = text.find("\n", start + len(window))
                    whole = text[start : len(text) if end < 0 else end].splitlines()[i].strip()
                    more = end >= 0 and _NON_BLANK.search(text, end) is not None
                    return whole, more
                return stripped, more
        start += len(window)
    return "", False


def unwrap_shell(command: str) -> str:
    """``command`` without a ``/bin/bash -lc '...'`` style wrapper (Codex shows commands so)."""
    if not _WRAPPED.match(command):
        return command
    quoted = _SINGLE_QUOTED.fullmatch(command)
    if quoted:  # the usual shape, without shlex's character-by-character cost
        return quoted.group(1).replace("'\\''", "'")
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if (
        len(words) == 3
        and words[0].rsplit("/", 1)[-1] in _SHELLS
        and words[1] in ("-c", "-lc", "-cl")
    ):
        return words[2]
    return command


def git_action(command: str) -> str | None:
    """``commit``, ``push`` or ``commit and push`` when the shell line runs those git
    subcommands, else None."""
    if "git" not in command:
        return None
    subcommands = {_git_subcommand(part) for part in _SEPARATORS.split(command)}
    committed = "commit" in subcommands
    pushed = "push" in subcommands
    if committed and pushed:
        return "commit and push"
    if committed:
        return "commit"
    if pushed:
        return "push"
    return None


def _git_subcommand(simple: str) -> str | None:
    try:
        words = shlex.split(simple)
    except ValueError:
        words = simple.split()
    # Skip leading variable assignments (GIT_EDITOR=true git commit ...).
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    if not words or words[0].rsplit("/", 1)[-1] != "git":
        return None
    rest = iter(words[1:])
    for word in rest:
        if word in _GIT_VALUE_OPTIONS:
            next(rest, None)
        elif not word.startswith("-"):
            return word
    return None


def command_progress(command: str, scrub: Scrub | None = None) -> str:
    """The progress line of a shell command: the git action it performs, or ``$ <first line>``
    (scrubbed, with ``scrub``, before it is cut)."""
    return git_action(command) or cut("$ " + first_line(command), scrub=scrub)


def exit_description(harness: str, exit_status: int) -> str:
    """``claude exited 1`` or ``codex exited by signal SIGTERM``."""
    if exit_status < 0:
        try:
            name = signal.Signals(-exit_status).name
        except ValueError:
            name = f"signal {-exit_status}"
        return f"{harness} exited by signal {name}"
    return f"{harness} exited {exit_status}"


def as_int(value: object) -> int | None:
    """``value`` if it is a real integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_count(value: object) -> int | None:
    """``value`` if it is an integer of zero or more (a token or turn count), else None: a
    negative count in the stream could only lower what the ledger adds up."""
    found = as_int(value)
    return found if found is not None and found >= 0 else None


def as_str(value: object) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


class EventLog:
    """Numbers Session events from 1 in stream order, and cuts their texts (scrubbed first, with
    ``scrub``)."""

    def __init__(self, scrub: Scrub | None = None) -> None:
        self._seq = 0
        self._scrub = scrub

    def make(
        self,
        kind: str,
        summary: str,
        *,
        tool: str | None = None,
        target: str | None = None,
        exit_status: int | None = None,
    ) -> SessionEvent:
        self._seq += 1
        scrub = self._scrub
        return SessionEvent(
            seq=self._seq,
            kind=kind,
            summary=cut(summary, SUMMARY_LIMIT, scrub),
            tool=cut(tool, 100, scrub) if tool is not None else None,
            target=cut(target, TARGET_LIMIT, scrub) if target is not None else None,
            exit_status=exit_status,
        )


def copy_config(source: Path, target: Path, names: Iterable[str]) -> None:
    """Copy the files ``names`` of ``source`` into ``target`` (made private), leaving alone a
    file already there (the CLI may have changed it since) and anything missing."""
    for name in names:
        origin = source / name
        destination = target / name
        # A link the agent left in its home (the file, or a directory on its way) must not be
        # written through: thirdshift would write outside the home, as its own user.
        if not origin.is_file() or os.path.lexists(destination):
            continue
        if any(part.is_symlink() for part in (target, *target.parents)):
            continue
        try:
            destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(origin, destination)
            destination.chmod(0o600)
        except OSError as exc:
            raise ThirdshiftError(
                f"cannot copy {origin} into the agent's home {target} ({exc.strerror}); check "
                "the permissions of both"
            ) from exc


def private_config_dir(
    base: Mapping[str, str],
    home: Path,
    *,
    variable: str,
    folder: str,
    names: Iterable[str],
    login: bool,
) -> Path:
    """``home/<folder>``, the CLI's configuration directory in its private home, with the files
    ``names`` copied in when ``login`` from the operator's: the one ``variable`` names, else
    ``<folder>`` in the user's home."""
    configured = base.get(variable)
    user = user_home(base)
    source = Path(configured) if configured else (user / folder if user else None)
    if source is not None and login:
        copy_config(source, home / folder, names)
    return home / folder


def provider_endpoints(hosts: Sequence[str], base_urls: Sequence[str]) -> tuple[HostPattern, ...]:
    """A Harness's provider hosts and the host of each base URL configured (empty: none)."""
    found = [parse_host_pattern(host) for host in hosts]
    for url in base_urls:
        endpoint = endpoint_of_url(url) if url else None
        if endpoint is not None and endpoint not in found:
            found.append(endpoint)
    return tuple(found)


def user_home(base: Mapping[str, str]) -> Path | None:
    """The home the environment names, if any."""
    home = base.get("HOME")
    return Path(home) if home else None
