"""Defanging: the agent's text made inert before thirdshift publishes it under its own name.

Whatever an agent writes that reaches GitHub (a pull request's title and body, a Failed run's
cause and last lines, killed work's names, the commit subjects of a review reply, an Architect
plan, a Base fix issue) can do nothing there: outside code, its @mentions notify no user or
team, its references to another repository's issues (``owner/repo#12``, an issue's address)
leave no backlink there, and everywhere, code included, no closing keyword closes an issue and
nothing reads as one of thirdshift's markers (which decide what a later Run reuses). A
zero-width space breaks each link (after the ``@``, the ``#``, the scheme, a keyword's first
letter) and shows nothing.

Pure functions of text; callers scrub first (a zero-width space inside a secret would hide it
from the scrubber), cut, and defang last (a cut may open a code span that was closed).
"""

from __future__ import annotations

import bisect
import re

ZERO_WIDTH = "\u200b"
TITLE_CHARS = 250  # GitHub allows 256; a defanged title may grow a little

# Markers are HTML comments opening with "thirdshift"; a quoted one can never pass for ours.
_OUR_COMMENT = re.compile(r"<!--\s*thirdshift", re.IGNORECASE)
# Code links nothing on GitHub and is left as written. Only what GitHub itself renders as code
# counts: a fence opening a line and closed by a like fence, an inline span closed by a run of
# as many backticks; anything less is text, and text is defanged (when in doubt, defang).
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?\n?\Z")
_BACKTICKS = re.compile(r"`+")
# An @ however it is spelled (HTML entities render as one), where GitHub would link a login
# or a team: not after a letter or digit (an e-mail address, git@host).
_AT = re.compile(r"(?<![A-Za-z0-9])(@|&#0*64;?|&#x0*40;?|&commat;)(?=[A-Za-z0-9])", re.IGNORECASE)
# owner/repo#12, not inside a path or an address (README.md#2-setup, example.com/o/r#1).
_ELSEWHERE = re.compile(r"(?<![A-Za-z0-9./:-])([A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+)#(?=\d)")
# An issue's or pull request's address: GitHub cross-references those too.
_ISSUE_ADDRESS = re.compile(
    r"\b(https?)://(?=[^\s/]+/([\w.-]+/[\w.-]+)/(?:issues|pull)/\d+)", re.IGNORECASE
)
# What GitHub may take for an issue after a closing keyword: #12, repo#12, owner/repo#12 (a #
# spelled as an entity too), GH-12, or an address; markup may come between. Bounded (names on
# GitHub are at most 100 characters), so a flood of word characters costs linear time.
_REFERENCE = (
    r"[\s:*_~\[(<>]{0,20}"
    r"(?:[\w.-]{0,100}(?:/[\w.-]{1,100})?(?:#|&#0{0,8}35;?|&#x0{0,8}23;?|&num;)\d"
    r"|GH-\d|https?://|www\.)"
)
# GitHub's whole list: close, closes, closed, fix, fixes, fixed, resolve, resolves, resolved.
_CLOSING = re.compile(
    r"(?<![A-Za-z0-9])(?=(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9])"
    rf"{_REFERENCE})([a-z])",
    re.IGNORECASE,
)


def _code_ranges(text: str) -> list[tuple[int, int]]:
    """Where ``text`` has code GitHub would render as code: closed fences, then inline spans
    outside them, as (start, end) offsets in order. Linear-ish in ``text`` whatever it holds
    (a flood of unclosed fences or of backtick runs must not hold a Run)."""
    lines = text.splitlines(keepends=True)
    closers: dict[str, _Closers] = {}
    for char in "`~":
        closers[char] = _Closers(
            [
                (index, len(closed.group(1)))
                for index, line in enumerate(lines)
                if (closed := _FENCE_CLOSE.match(line)) and closed.group(1)[0] == char
            ]
        )
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    fences: list[tuple[int, int]] = []
    index = 0
    while index < len(lines):
        opened = _FENCE_OPEN.match(lines[index])
        info = lines[index][opened.end() :] if opened else ""
        if opened and not (opened.group(1)[0] == "`" and "`" in info):
            fence = opened.group(1)
            later = closers[fence[0]].first(index, len(fence))
            if later is not None:
                fences.append((starts[index], starts[later + 1]))
                index = later + 1
                continue
        index += 1
    ranges: list[tuple[int, int]] = []
    last = 0
    for start, end in [*fences, (len(text), len(text))]:
        ranges += _inline_spans(text, last, start)
        if start < end:
            ranges.append((start, end))
        last = end
    return ranges


class _Closers:
    """The lines that could close a fence of one character, with their fence lengths: the
    first that closes a fence of a given length after a given line, found in logarithmic time
    (a segment tree of the longest fence in each range)."""

    def __init__(self, found: list[tuple[int, int]]) -> None:
        self._lines = [index for index, _ in found]
        self._size = 1
        while self._size < len(found):
            self._size *= 2
        self._longest = [0] * (2 * self._size)
        for k, (_, length) in enumerate(found):
            self._longest[self._size + k] = length
        for k in range(self._size - 1, 0, -1):
            self._longest[k] = max(self._longest[2 * k], self._longest[2 * k + 1])

    def first(self, after: int, length: int) -> int | None:
        """The first line after line ``after`` that closes a fence of ``length``, or None."""
        at = self._first(1, 0, self._size, bisect.bisect_right(self._lines, after), length)
        return None if at is None else self._lines[at]

    def _first(self, node: int, low: int, high: int, start: int, length: int) -> int | None:
        if high <= start or self._longest[node] < length:
            return None
        if high - low == 1:
            return low
        middle = (low + high) // 2
        found = self._first(2 * node, low, middle, start, length)
        return (
            found if found is not None else self._first(2 * node + 1, middle, high, start, length)
        )


def _inline_spans(text: str, begin: int, end: int) -> list[tuple[int, int]]:
    """The inline code spans of ``text[begin:end]`` (no fence in it): on one line, a run of
    backticks not after a backslash, closed by the next run of exactly as many."""
    spans: list[tuple[int, int]] = []
    line_start = begin
    while line_start < end:
        newline = text.find("\n", line_start, end)
        line_end = end if newline < 0 else newline
        runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text, line_start, line_end)]
        following: dict[int, int] = {}  # for each run, the next run of its length
        next_of_length: dict[int, int] = {}
        for k in range(len(runs) - 1, -1, -1):
            length = runs[k][1] - runs[k][0]
            if length in next_of_length:
                following[k] = next_of_length[length]
            next_of_length[length] = k
        k = 0
        while k < len(runs):
            opener = runs[k][0]
            escaped = opener > line_start and text[opener - 1] == "\\"
            if not escaped and k in following:
                spans.append((opener, runs[following[k]][1]))
                k = following[k] + 1
            else:
                k += 1
        line_start = line_end + 1
    return spans


def defanged(text: str, repository: str | None = None) -> str:
    """``text`` as it may appear on GitHub under thirdshift's name: it can never pass for one
    of thirdshift's markers, no closing keyword in it closes anything (in code too: whether
    GitHub reads keywords in code is not documented), and outside code its @mentions notify
    nobody and its references to issues elsewhere leave no backlink (an unattended agent pages
    no one). References to this repository's issues (``#5``, and ``owner/name#5`` or an issue's
    address when ``repository`` names it as ``owner/name``) stay links."""
    own = repository.lower() if repository else None

    def elsewhere(found: re.Match[str]) -> str:
        same = own is not None and found.group(1).lower() == own
        return found.group(0) if same else found.group(1) + "#" + ZERO_WIDTH

    def address(found: re.Match[str]) -> str:
        same = own is not None and found.group(2).lower() == own
        return found.group(0) if same else found.group(1) + "://" + ZERO_WIDTH

    text = _CLOSING.sub("\\1" + ZERO_WIDTH, _OUR_COMMENT.sub("<!-- (quoted) thirdshift", text))
    pieces: list[str] = []
    last = 0
    for start, end in [*_code_ranges(text), (len(text), len(text))]:
        outside = _AT.sub("@" + ZERO_WIDTH, text[last:start])
        outside = _ELSEWHERE.sub(elsewhere, outside)
        pieces += [_ISSUE_ADDRESS.sub(address, outside), text[start:end]]
        last = end
    return "".join(pieces)


def defanged_title(title: str, repository: str | None = None, limit: int = TITLE_CHARS) -> str:
    """A one-line title, defanged, within ``limit`` characters: cut before it is defanged (a
    cut after could open a code span whose mention was left as code), shorter while the
    zero-width spaces push it over."""
    flat = " ".join(title.split())
    keep = limit
    while len(shown := defanged(flat[:keep], repository)) > limit:
        keep -= len(shown) - limit
    return shown


def _own_closing_line(number: int) -> re.Pattern[str]:
    """A line that says nothing but that it closes issue ``number`` ("Closes #7", "- Fixes:
    #7.")."""
    return re.compile(
        rf"^[ \t]*(?:[-*+][ \t]+)?(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)[ \t]*:?[ \t]*"
        rf"(?:[*_]{{0,2}})#{number}(?![0-9])(?:[*_]{{0,2}})[ \t]*\.?[ \t]*$\n?",
        re.IGNORECASE | re.MULTILINE,
    )


def pull_request_body(body: str, number: int, repository: str | None = None) -> str:
    """The agent's pull request body as published for issue ``number``: defanged, so none of
    its closing keywords counts, its own line closing ``number`` dropped, and thirdshift's one
    ``Closes #number`` at the end."""
    kept = _own_closing_line(number).sub("", body)
    return f"{defanged(kept, repository).strip()}\n\nCloses #{number}".strip()


# A closing keyword and the one reference it closes, as GitHub reads a commit message.
_CLOSES = re.compile(
    r"(?<![A-Za-z0-9])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?![A-Za-z0-9])[\s:*_]{0,20}"
    r"((?:[\w.-]{1,100}/[\w.-]{1,100})?#\d+|GH-\d+"
    r"|https?://[^\s/]{1,255}/[\w.-]{1,100}/[\w.-]{1,100}/(?:issues|pull)/\d+)",
    re.IGNORECASE,
)


def closed_elsewhere(text: str, number: int, repository: str) -> tuple[str, ...]:
    """The issues other than ``number`` of ``repository`` (``owner/name``) that ``text`` (a
    commit message) closes once merged into the default branch, as written, in order. A
    commit cannot be defanged without rewriting it, so a Self-merge holds on these."""
    own = {
        f"#{number}",
        f"gh-{number}",
        f"{repository.lower()}#{number}",
    }
    found: list[str] = []
    for match in _CLOSES.finditer(text):
        reference = match.group(1)
        address = re.match(r"https?://[^\s/]+/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)", reference)
        if address is not None:
            mine = (
                address.group(1).lower() == repository.lower() and int(address.group(2)) == number
            )
        else:
            mine = reference.lower() in own
        if not mine and reference not in found:
            found.append(reference)
    return tuple(found)
