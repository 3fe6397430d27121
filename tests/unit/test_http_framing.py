"""One request read off a client and framed exactly: the bytes of its body as they are to be
forwarded, and not one byte of what follows it."""

from __future__ import annotations

import asyncio

import pytest

from thirdshift.harnesses.http_framing import BadRequest, RequestHead, read_one_request


def read(data: bytes) -> tuple[RequestHead, bytes, bytes]:
    """The head, the body's forwarded bytes, and what is left unread on the reader."""

    async def go() -> tuple[RequestHead, bytes, bytes]:
        reader = asyncio.StreamReader(limit=1024)
        reader.feed_data(data)
        reader.feed_eof()
        head, body = await read_one_request(reader, head_seconds=5, idle_seconds=5)
        sent = b"".join([chunk async for chunk in body])
        return head, sent, await reader.read()

    return asyncio.run(go())


NEXT = b"GET /next HTTP/1.1\r\n\r\n"


def test_a_content_length_body_is_read_and_the_next_request_left() -> None:
    head, body, left = read(b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc" + NEXT)
    assert (head.method, head.target, head.version) == ("POST", "/a", "HTTP/1.1")
    assert head.fields == (("Content-Length", "3"),)
    assert body == b"abc"
    assert left == NEXT


def test_a_chunked_body_is_forwarded_as_sent_with_its_trailers() -> None:
    """Chunk lines, extensions and trailers go on as they came; reading stops at the blank
    line after the last chunk."""
    chunks = b"3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nDigest: d\r\n\r\n"
    _, body, left = read(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + NEXT)
    assert body == chunks
    assert left == NEXT


def test_a_request_without_a_length_has_no_body() -> None:
    _, body, left = read(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n" + NEXT)
    assert body == b""
    assert left == NEXT


@pytest.mark.parametrize(
    "size",
    [b"0x3", b"-3", b" 3", b"1_0", b"+3", b"", b"12345678901234567"],
)
def test_a_chunk_size_that_is_no_plain_hex_number_is_refused(size: bytes) -> None:
    """Python's int() reads "0x3", "1_0" and " 3"; a server may not: no guessing."""
    with pytest.raises(BadRequest) as raised:
        read(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nabc\r\n")
    assert raised.value.status == 400


def test_a_chunk_longer_than_its_size_is_refused() -> None:
    with pytest.raises(BadRequest, match="longer than its size"):
        read(b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /a HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501),
        (b"POST /a HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nX: a\nContent-Length: 3\r\n\r\n", 400),
        (b"POST /a\r\n\r\n", 400),
        (b"POST /a HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n", 431),
    ],
    ids=[
        "length-and-chunked",
        "two-lengths",
        "a-list-of-lengths",
        "not-chunked-last",
        "space-before-colon",
        "folded",
        "bare-line-feed",
        "no-version",
        "head-too-long",
    ],
)
def test_a_head_framed_two_ways_is_refused_with_its_status(head: bytes, status: int) -> None:
    with pytest.raises(BadRequest) as raised:
        read(head + b"abc")
    assert raised.value.status == status


def test_a_body_cut_short_is_no_request() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        read(b"POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
