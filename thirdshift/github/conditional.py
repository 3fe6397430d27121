"""Conditional requests for the GitHub adapter: the validators (ETags) of its repeated reads,
each with the record it stood for, and the count of requests it sent.

GitHub answers ``If-None-Match`` with an empty 304 when nothing changed, and a 304 spends no
rate-limit point. No HTTP cache is used: GitHub sends ``Cache-Control: max-age=60``, which such
a cache would obey by answering from memory without asking, so a daemon would see a label or a
check a minute late. Here every read asks GitHub; only an unchanged answer is taken from memory.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from github import Auth
from github.Requester import Requester

from thirdshift.errors import GitHubError

__all__ = [
    "ConditionalReads",
    "CountingToken",
    "RequestCounter",
    "RequestCounts",
    "Validators",
]

T = TypeVar("T")

DEFAULT_SIZE = 4096
_NEXT_PAGE = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


@dataclass(frozen=True)
class RequestCounts:
    """Requests the adapter sent to GitHub's API (REST and GraphQL, every page and every retry
    included), and how many of them GitHub answered 304 Not Modified."""

    sent: int
    not_modified: int

    @property
    def spent(self) -> int:
        """Requests that may have cost a rate-limit point: all but the 304s."""
        return self.sent - self.not_modified


class RequestCounter:
    """The running :class:`RequestCounts` of one adapter, shared by every thread using it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = 0
        self._not_modified = 0

    def sent(self) -> None:
        with self._lock:
            self._sent += 1

    def not_modified(self) -> None:
        with self._lock:
            self._not_modified += 1

    def counts(self) -> RequestCounts:
        with self._lock:
            return RequestCounts(self._sent, self._not_modified)


def fixed(token: str) -> Callable[[], str]:
    """A token source that always gives ``token`` (a personal access token's)."""
    return lambda: token


class CountingToken(Auth.Auth):
    """The token, counting each request it authenticates. PyGithub puts it on every request it
    sends (each page, each retry, the GraphQL mutations), which makes it the one place that sees
    them all without reaching into PyGithub's private connection code. The token is asked of
    ``token`` for each request: a GitHub App's installation token is renewed under a long Run."""

    def __init__(self, token: Callable[[], str], on_request: Callable[[], None]) -> None:
        self._token = token
        self._on_request = on_request

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        return self._token()

    def authentication(self, headers: dict[str, Any]) -> None:
        self._on_request()
        super().authentication(headers)

    @property
    def _masked_token(self) -> str:
        return "token (removed)"


class Validators:
    """The last ETag of each repeated GET (keyed by its path and query) and the frozen record
    made from that answer. The least recently used entry goes once ``size`` are held; one lock
    guards it, as every Run of a daemon reads through the same adapter."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, object]] = OrderedDict()

    def get(self, key: str) -> tuple[str, object] | None:
        """The ETag and record stored for ``key``, or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: str, etag: str, value: object) -> None:
        with self._lock:
            self._entries[key] = (etag, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, key: str) -> None:
        """Drop ``key``: its last answer could not be kept (it spans pages now)."""
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class ConditionalReads:
    """Repeated GETs made through PyGithub's requester, each asked with the ETag of its last
    answer. A 304 has an empty body, which the requester hands back as None: the record kept
    with that ETag is the answer. Called inside a request's ``send``, so retries, rate limits
    and errors are the adapter's as for any other request."""

    def __init__(
        self, requester: Requester, counter: RequestCounter, validators: Validators, per_page: int
    ) -> None:
        self._requester = requester
        self._counter = counter
        self._validators = validators
        self._per_page = per_page

    def one(self, path: str, convert: Callable[[Any], T]) -> T:
        """``GET path``, one object, converted by ``convert``."""
        key = _key(path, {}, "")
        kept, headers, data = self._ask(path, {}, key)
        if kept is not None:
            return cast(T, kept[1])
        value = convert(data)
        etag = _header(headers, "etag")
        if etag is not None:
            self._validators.put(key, etag, value)
        return value

    def pages(
        self,
        path: str,
        query: Mapping[str, str],
        items: Callable[[Any], list[Any]],
        convert: Callable[[list[Any]], T],
        *,
        view: str = "",
        enough: Callable[[list[Any]], bool] = lambda _: False,
    ) -> T:
        """Every page of a list (``items`` picks a page's entries), converted at once; only the
        first page is asked conditionally. An answer is kept only when it fits in one page with
        room to spare: a 304 vouches for the first page alone, and a full page may have a next
        one the 304 would hide. A longer list is read whole every time. ``view`` tells apart
        the records different callers make from the same answer.

        ``enough`` stops the reading at the first page after which the entries so far hold all
        that ``convert`` uses (the newest few of a list); when the first page held it, the
        answer is kept too, since then a 304 vouches for everything ``convert`` saw."""
        query = {**query, "per_page": str(self._per_page)}
        key = _key(path, query, view)
        kept, headers, data = self._ask(path, query, key)
        if kept is not None:
            return cast(T, kept[1])
        found = items(data)
        following = _next_page(headers)
        keep = enough(found) or (following is None and len(found) < self._per_page)
        etag = _header(headers, "etag")
        while following is not None and not enough(found):
            more_headers, more = self._requester.requestJsonAndCheck("GET", following)
            found += items(more)
            following = _next_page(more_headers)
        value = convert(found)
        if keep and etag is not None:
            self._validators.put(key, etag, value)
        else:
            self._validators.forget(key)
        return value

    def _ask(
        self, path: str, query: Mapping[str, str], key: str
    ) -> tuple[tuple[str, object] | None, Mapping[str, Any], Any]:
        """(the kept entry when GitHub answered 304, else None; headers; JSON body)."""
        kept = self._validators.get(key)
        asked = {"If-None-Match": kept[0]} if kept is not None else {}
        headers, data = self._requester.requestJsonAndCheck(
            "GET", path, parameters=dict(query), headers=asked
        )
        if data is not None:
            return None, headers, data
        if kept is None:
            raise GitHubError(f"GitHub answered GET {path} with no body")
        self._counter.not_modified()
        return kept, headers, data


def _key(path: str, query: Mapping[str, str], view: str) -> str:
    return f"{path}?{urllib.parse.urlencode(sorted(query.items()))}#{view}"


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    return next((str(v) for k, v in headers.items() if k.lower() == name), None)


def _next_page(headers: Mapping[str, Any]) -> str | None:
    found = _NEXT_PAGE.search(_header(headers, "link") or "")
    return found.group(1) if found else None
