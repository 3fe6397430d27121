"""``python -m thirdshift.cli`` without paying for its imports each time: a warm starter.

Each ``thirdshift`` a test starts used to import the whole product first, about a second of CPU
of the 1.6 s such a process spends; the end-to-end tier starts some 250 of them on two cores
(adr/0051). A warm starter is one process per pytest worker that imported ``thirdshift`` once and
has no thread. For each command it forks: the child takes the caller's argv, environment, working
directory, process group and stdio, puts back the signal dispositions a fresh interpreter starts
with, and runs the ``thirdshift.cli`` module as ``-m`` would (``runpy``), then leaves through the
interpreter's own exit. What the test holds is a ``WarmProcess``: the parts of ``Popen`` the
tests use (``pid``, ``stdout``, ``stderr``, ``poll``, ``wait``, ``communicate``, ``send_signal``,
``kill``, ``terminate``, ``returncode``), its exit status reported by the starter, which is the
child's parent and reaps it.

What a warm start cannot show: an import that fails, or one that reads the environment, in a
fresh interpreter; and its /proc/<pid>/environ is the starter's, not what it was given. So the
tests that start the installed ``thirdshift`` script (the first hour, the wheel, ``config``)
still start it cold, as does any run whose interpreter is not the suite's own, and so do the
tests whose hostile agents search every process's environment for the token and the model key
(the ``cold_start`` fixture of tests/e2e/conftest.py, or THIRDSHIFT_TEST_COLD_START=1 for all).

Run as a script it is the starter: ``python warm_start.py SOCKET``; it ends when its stdin (a pipe
from the worker) closes.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_MAX_FDS = 3
_MESSAGE_BYTES = 1 << 20
# What a fresh interpreter sets itself; every other signal starts at its default.
_PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)


# -- the starter (its own process) -------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    new_group: bool


def _serve(path: str) -> _Request | None:
    """Fork a child per request until stdin closes. Returns the request in each child (which
    then runs it) and ``None`` in the starter when it is done."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "lifeline")
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline":
                if not os.read(sys.stdin.fileno(), 4096):
                    selector.close()
                    listener.close()
                    os.unlink(path)
                    os.rmdir(os.path.dirname(path))
                    return None
            elif key.data == "accept":
                connection, _ = listener.accept()
                fds: list[int] = []
                try:
                    request, fds = _received(connection)
                    sys.stdout.flush()  # else the child would write the starter's buffer again
                    sys.stderr.flush()
                    pid = os.fork()
                except Exception as error:  # one bad request must not end the starter
                    print(f"warm start: a request failed: {error!r}", file=sys.stderr, flush=True)
                    for fd in fds:
                        os.close(fd)
                    connection.close()
                    continue
                if pid == 0:
                    selector.close()
                    listener.close()
                    for pidfd, (_, other) in waiting.items():
                        os.close(pidfd)
                        other.close()
                    _become(request, fds)
                    # Only now: a signal the test sends once it has the pid finds the child's
                    # own process group and dispositions.
                    connection.sendall(f"pid {os.getpid()}\n".encode())
                    connection.close()
                    return request
                if request.new_group:
                    with contextlib.suppress(OSError):
                        os.setpgid(pid, pid)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, connection)
                selector.register(pidfd, selectors.EVENT_READ, "exit")
            else:
                pidfd = key.fd
                pid, connection = waiting.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the test may have let go of it
                    connection.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                connection.close()


def _received(connection: socket.socket) -> tuple[_Request, list[int]]:
    """One request and its three descriptors; a request not whole within seconds is refused."""
    connection.settimeout(10)
    message, fds, _, _ = socket.recv_fds(connection, _MESSAGE_BYTES, _MAX_FDS)
    try:
        while not message.endswith(b"\n"):  # a stream may hand it over in parts
            more = connection.recv(_MESSAGE_BYTES)
            if not more:
                raise ValueError("the request ended before its end of line")
            message += more
        if len(fds) != _MAX_FDS:
            raise ValueError(f"{len(fds)} descriptors came with the request, not {_MAX_FDS}")
        fields = json.loads(message)
        request = _Request(
            argv=list(fields["argv"]),
            env=dict(fields["env"]),
            cwd=str(fields["cwd"]),
            new_group=bool(fields["new_group"]),
        )
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    connection.settimeout(None)
    return request, fds


def _become(request: _Request, fds: Sequence[int]) -> None:
    """In the child: what ``Popen`` and a fresh interpreter would have given it."""
    if request.new_group:
        os.setpgid(0, 0)
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_IGN if sig in _PYTHON_IGNORES else signal.SIG_DFL)
        except (OSError, ValueError):
            continue
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    sys.path[0] = request.cwd
    sys.argv = ["-m", *request.argv]


def _run_starter() -> None:
    import runpy

    # Everything a command imports, before any fork; the product starts no thread on import.
    # Alembic too: the first command of each test's world migrates a new database with it.
    import alembic.command
    import alembic.config  # noqa: F401

    import thirdshift.bootstrap.daemon
    import thirdshift.bootstrap.runs
    import thirdshift.cli
    import thirdshift.web.app  # noqa: F401

    if threading.active_count() != 1:
        raise SystemExit("warm start: an import started a thread; a fork would copy it half-done")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.collect()
    gc.freeze()  # the children's collections then leave the shared pages alone
    request = _serve(sys.argv[1])
    if request is None:
        return
    runpy.run_module("thirdshift.cli", run_name="__main__", alter_sys=True)


# -- the test's side ---------------------------------------------------------------------------


class WarmProcess:
    """A ``thirdshift`` the starter forked, held like a ``subprocess.Popen`` in text mode."""

    def __init__(self, args: list[str], connection: socket.socket, pid: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | Any = None
        self.stdout: IO[str] | None = None
        self.stderr: IO[str] | None = None
        self._connection = connection
        self._buffer = b""
        self._output: dict[str, list[bytes]] = {"stdout": [], "stderr": []}

    def _status(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        self._connection.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                chunk = self._connection.recv(4096)
                if not chunk:
                    raise RuntimeError(f"the warm starter of {self.args} went away")
                self._buffer += chunk
        except (TimeoutError, BlockingIOError):
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        word, value = line.decode().split()
        assert word == "exit", line
        self.returncode = int(value)
        self._connection.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(
        self, input: str | None = None, timeout: float | None = None
    ) -> tuple[str, str]:
        """Read stdout and stderr to their end, then the exit status; on a timeout what was
        read so far is kept for the next call, as ``Popen`` keeps it (and, like it, reads the
        pipes beneath any text a test took through ``stdout`` itself)."""
        assert input is None, "a warm-started thirdshift reads no stdin"
        deadline = None if timeout is None else time.monotonic() + timeout
        streams = {name: s for name, s in (("stdout", self.stdout), ("stderr", self.stderr)) if s}
        with selectors.DefaultSelector() as selector:
            for name, stream in streams.items():
                if not stream.closed:
                    selector.register(stream.fileno(), selectors.EVENT_READ, name)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        self._output[key.data].append(chunk)
                    else:
                        selector.unregister(key.fd)
                        streams[key.data].close()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        return _decoded(self._output["stdout"]), _decoded(self._output["stderr"])


def _decoded(chunks: list[bytes]) -> str:
    """As ``Popen(text=True)`` decodes: the locale's encoding, universal newlines."""
    text = b"".join(chunks).decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


Sink = int | IO[str]
"""Where a stream goes: ``subprocess.PIPE``, ``subprocess.DEVNULL``, a file or a descriptor."""


class WarmStarter:
    """One starter process, started on first use and ended with the worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket = ""

    def _ensure(self) -> str:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                directory = tempfile.mkdtemp(prefix="thirdshift-warm-")
                self._socket = str(Path(directory) / "start.sock")
                self._process = subprocess.Popen(
                    [sys.executable, __file__, self._socket],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=None,
                )
                assert self._process.stdout is not None
                if self._process.stdout.readline() != b"ready\n":
                    raise RuntimeError("the warm starter did not start; see its stderr")
            return self._socket

    def start(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        new_group: bool = False,
        stdout: Sink = subprocess.PIPE,
        stderr: Sink = subprocess.PIPE,
    ) -> WarmProcess:
        """``python -m thirdshift.cli ARGS`` with stdin from /dev/null, as ``Popen(...,
        text=True)`` would start it; ``stdout`` and ``stderr`` as ``Popen`` takes them (``PIPE``,
        ``DEVNULL``, a file or a descriptor)."""
        path = self._ensure()
        given = [os.open(os.devnull, os.O_RDONLY)]
        readers: list[int | None] = []
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            for sink in (stdout, stderr):
                if sink == subprocess.PIPE:
                    read, write = os.pipe()
                    readers.append(read)
                    given.append(write)
                elif sink == subprocess.DEVNULL:
                    readers.append(None)
                    given.append(os.open(os.devnull, os.O_WRONLY))
                else:
                    readers.append(None)
                    given.append(os.dup(sink if isinstance(sink, int) else sink.fileno()))
            message = json.dumps(
                {"argv": list(args), "env": dict(env), "cwd": str(cwd), "new_group": new_group}
            ).encode()
            message += b"\n"
            connection.connect(path)
            sent = socket.send_fds(connection, [message], given)
            connection.sendall(message[sent:])
        except BaseException:
            connection.close()
            for fd in readers:
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in given:
                os.close(fd)
        buffer = b""
        while b"\n" not in buffer:
            chunk = connection.recv(4096)
            if not chunk:
                raise RuntimeError(f"the warm starter did not start {list(args)}")
            buffer += chunk
        line, _, rest = buffer.partition(b"\n")
        word, value = line.decode().split()
        if word != "pid":  # it died before it could run the command
            raise RuntimeError(f"the warm starter's child for {list(args)} exited {value}")
        process = WarmProcess(
            [sys.executable, "-m", "thirdshift.cli", *args], connection, int(value)
        )
        process._buffer = rest
        out, err = readers
        process.stdout = None if out is None else _text(out)
        process.stderr = None if err is None else _text(err)
        return process


def _text(fd: int) -> IO[str]:
    return io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "r")), newline=None)


STARTER = WarmStarter()
Started = subprocess.Popen[str] | WarmProcess
"""A ``thirdshift`` a test started, warm or cold."""


def start_thirdshift(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    python: str = sys.executable,
    new_group: bool = False,
    stdout: Sink = subprocess.PIPE,
    stderr: Sink = subprocess.PIPE,
) -> Started:
    """``python -m thirdshift.cli ARGS``: warm when ``python`` is the suite's own interpreter,
    else a fresh ``Popen`` (an install of its own must import from its own paths)."""
    if python == sys.executable and os.environ.get("THIRDSHIFT_TEST_COLD_START") != "1":
        return STARTER.start(
            args, env=env, cwd=cwd, new_group=new_group, stdout=stdout, stderr=stderr
        )
    return subprocess.Popen(
        [python, "-m", "thirdshift.cli", *args],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=True,
        process_group=0 if new_group else None,
    )


if __name__ == "__main__":
    _run_starter()
