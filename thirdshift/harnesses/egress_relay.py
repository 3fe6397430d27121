"""Copying between a session's connection and its upstream, for the egress proxy: a tunnel
both ways, or one request's body up and its answer down; either ends once no byte has moved
for the idle time, so a silent connection holds none of the daemon's descriptors for long."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any

RELAY_CHUNK = 64 * 1024


class _Idle:
    """When a connection last moved a byte, either way."""

    def __init__(self, seconds: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._seconds = seconds
        self._last = self._loop.time()

    def touch(self) -> None:
        self._last = self._loop.time()

    async def expired(self) -> None:
        """Returns once no byte has moved for the idle time."""
        while (left := self._last + self._seconds - self._loop.time()) > 0:
            await asyncio.sleep(left)


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, idle: _Idle, *, eof: bool = True
) -> None:
    while chunk := await source.read(RELAY_CHUNK):
        idle.touch()
        sink.write(chunk)
        await sink.drain()
    if eof and sink.can_write_eof():
        sink.write_eof()


async def _until_done(
    required: Sequence[Coroutine[Any, Any, None]],
    others: Sequence[Coroutine[Any, Any, None]],
    idle: _Idle,
) -> None:
    """Run them all until every ``required`` one has ended, any one has raised, or the
    connection has gone idle; then stop the rest."""
    ends = [asyncio.ensure_future(step) for step in required]
    tasks = {*ends, *(asyncio.ensure_future(step) for step in others)}
    watch = asyncio.ensure_future(idle.expired())
    pending = {*tasks, watch}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                return
            if any(not task.cancelled() and task.exception() is not None for task in done):
                return
            if all(task.done() for task in ends):
                return
    finally:
        for task in (*tasks, watch):
            task.cancel()
        await asyncio.gather(*tasks, watch, return_exceptions=True)


async def relay_tunnel(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    *,
    idle_seconds: float,
) -> None:
    """A tunnel: copy both ways until both sides are done, or until no byte has moved either
    way for ``idle_seconds``."""
    idle = _Idle(idle_seconds)
    try:
        await _until_done(
            [
                _pipe(client_reader, upstream_writer, idle),
                _pipe(upstream_reader, client_writer, idle),
            ],
            [],
            idle,
        )
    finally:
        upstream_writer.close()


async def forward_one(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    body: AsyncIterator[bytes],
    *,
    idle_seconds: float,
) -> None:
    """One request's ``body`` up (its head already sent), the upstream's answer down until it
    closes; the answer is relayed while the body goes up (an early answer, a 100 Continue).
    What the client sends after the body is read and dropped."""
    idle = _Idle(idle_seconds)

    async def send() -> None:
        async for data in body:
            idle.touch()
            upstream_writer.write(data)
            await upstream_writer.drain()
        while await client_reader.read(RELAY_CHUNK):
            pass  # not a byte of it reaches the upstream, nor keeps the connection alive

    try:
        await _until_done([_pipe(upstream_reader, client_writer, idle)], [send()], idle)
    finally:
        upstream_writer.close()
