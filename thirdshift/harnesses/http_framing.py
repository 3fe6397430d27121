"""One HTTP/1.1 request read off a client, framed exactly: its head's header fields, and its
body by ``Content-Length`` or the chunked transfer coding (RFC 9112, section 6).

A proxy that forwards one request a connection must know where that request ends, or whatever
the client sends after it (a second, pipelined request) goes on unread: past the proxy's
rewrite of its head and its one-request rule. So a head whose framing two readers could read
differently (both a length and a coding, two lengths, a coding other than chunked, a field
name with a space, a folded line) is refused, and a body is handed on as the bytes that frame
it and no byte more. The egress proxy and the model gateway both read requests so.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError

CHUNK = 64 * 1024
"""Body bytes handed on at once, at most."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class BadRequest(ThirdshiftError):
    """A request whose head or body framing the proxy will not guess at; ``status`` is the
    HTTP status it answers with (400, 501 for a coding it does not know)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass(frozen=True)
class RequestHead:
    """A request's first line, split, and its header fields in order (names as sent)."""

    method: str
    target: str
    version: str
    fields: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        """The values of every field called ``name`` (any case), in order."""
        lower = name.lower()
        return [value for field, value in self.fields if field.lower() == lower]


def header_fields(lines: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The ``name: value`` fields of a head's lines after the first (an empty line ignored);
    ``BadRequest`` for a line that is no field (no colon, a name that is no token, a folded
    line), since a server might read it as one."""
    fields: list[tuple[str, str]] = []
    for line in lines:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise BadRequest(400, f"a request header line that is no field: {line[:80]!r}")
        if any(c in value for c in "\r\n\0"):
            raise BadRequest(400, "a request header value holds a line break or a NUL")
        fields.append((name, value.strip(" \t")))
    return tuple(fields)


def parse_head(head: str) -> RequestHead:
    """The head of one request (its text up to and with the blank line), checked."""
    lines = head.split("\r\n")
    if any("\n" in line or "\r" in line for line in lines):
        # A bare line feed is read as a line end by some servers and not by others.
        raise BadRequest(400, "a request head's lines end in CRLF")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise BadRequest(400, "not an HTTP request line")
    method, target, version = parts
    return RequestHead(method, target, version, header_fields(lines[1:]))


def body_length(head: RequestHead) -> int | None:
    """The body's length in bytes (0 when the head names none), or None for a chunked body;
    ``BadRequest`` when the head frames it ambiguously."""
    codings = [
        coding.strip().lower()
        for value in head.values("Transfer-Encoding")
        for coding in value.split(",")
    ]
    lengths = {value.strip() for value in head.values("Content-Length")}
    if codings:
        if lengths:
            raise BadRequest(400, "a request with both Content-Length and Transfer-Encoding")
        if codings != ["chunked"]:
            raise BadRequest(501, f"a request body coded {', '.join(codings)!r}; send it chunked")
        return None
    if not lengths:
        return 0
    if len(lengths) > 1:
        raise BadRequest(400, "a request with two different Content-Length values")
    (text,) = lengths
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise BadRequest(400, f"a Content-Length that is no length: {text[:20]!r}")
    return int(text)


async def body_bytes(
    reader: asyncio.StreamReader, length: int | None, *, idle_seconds: float
) -> AsyncIterator[bytes]:
    """The bytes of one body as they are to be forwarded (chunked: its chunk lines, data and
    trailers as sent, up to and with the last chunk's blank line), read from ``reader`` and
    nothing after them. ``BadRequest`` for a malformed chunk; ``asyncio.IncompleteReadError``
    when the client stops short; ``TimeoutError`` when no byte comes for ``idle_seconds``."""

    async def exactly(count: int) -> AsyncIterator[bytes]:
        while count:
            data = await asyncio.wait_for(reader.read(min(count, CHUNK)), idle_seconds)
            if not data:
                raise asyncio.IncompleteReadError(b"", count)
            count -= len(data)
            yield data

    async def line() -> bytes:
        try:
            found = await asyncio.wait_for(reader.readuntil(b"\r\n"), idle_seconds)
        except asyncio.LimitOverrunError as error:
            raise BadRequest(400, "a chunk line too long") from error
        if b"\n" in found[:-2] or b"\r" in found[:-2]:
            raise BadRequest(400, "a chunk line holds a bare line break")
        return found

    if length is not None:
        async for data in exactly(length):
            yield data
        return
    while True:
        size_line = await line()
        size_text = size_line[:-2].split(b";", 1)[0]
        if _CHUNK_SIZE.fullmatch(size_text) is None:
            raise BadRequest(400, f"a chunk size that is no hex number: {size_text[:20]!r}")
        size = int(size_text, 16)
        yield size_line
        if size == 0:
            break
        async for data in exactly(size):
            yield data
        if await asyncio.wait_for(reader.readexactly(2), idle_seconds) != b"\r\n":
            raise BadRequest(400, "a chunk longer than its size says")
        yield b"\r\n"
    while (trailer := await line()) != b"\r\n":
        header_fields([trailer[:-2].decode("latin-1")])
        yield trailer
    yield b"\r\n"


async def read_one_request(
    reader: asyncio.StreamReader, *, head_seconds: float, idle_seconds: float
) -> tuple[RequestHead, AsyncIterator[bytes]]:
    """One request off ``reader``: its head (read within ``head_seconds``; the reader's limit
    bounds its size) and an iterator over its body's bytes as they are to be forwarded, which
    reads no byte past the body. ``BadRequest`` (431 for a head over the limit, 408 for one
    not sent in time, 400/501 for one that cannot be framed)."""
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), head_seconds)
    except asyncio.LimitOverrunError as error:
        raise BadRequest(431, "request head too long") from error
    except TimeoutError as error:
        raise BadRequest(408, "request head not sent in time") from error
    head = parse_head(raw.decode("latin-1")[:-4])
    return head, body_bytes(reader, body_length(head), idle_seconds=idle_seconds)


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


async def answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    """A short plain-text answer that closes the connection (the proxy's and the gateway's
    refusals alike)."""
    body = (text + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
