"""The scripted model server: a loopback stand-in for the Anthropic and OpenAI model APIs.

The real ``claude``, ``codex`` and ``qwen`` CLIs are pointed at it (see :func:`claude_env`,
:func:`codex_config_args`, :func:`codex_env`, :func:`qwen_env`) and it answers each model
request with the next turn of a :class:`ModelScript`. Every request is appended to a JSON-lines
request log. The script format is documented in ``docs/model-script.md``.

About 510 lines: the variables pointing each real CLI at the server sit beside the server they
name, one small function per Harness, so a Harness's test setup is found in one place.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import re
import select
import socket
import threading
import time
import zlib
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from thirdshift.errors import SandboxError
from thirdshift.sandbox.model import wire
from thirdshift.sandbox.model.script import ModelScript, ScriptedToolCall, Turn

__all__ = [
    "SANDBOX_API_KEY",
    "SANDBOX_CODEX_KEY_VAR",
    "SANDBOX_CODEX_MODEL",
    "SANDBOX_CODEX_PROVIDER",
    "ModelScript",
    "ScriptedModelServer",
    "claude_env",
    "codex_config_args",
    "codex_env",
    "qwen_env",
]

SANDBOX_API_KEY = "sandbox-not-a-secret"
SANDBOX_CODEX_PROVIDER = "thirdshift-sandbox"
SANDBOX_CODEX_KEY_VAR = "SANDBOX_MODEL_API_KEY"
# A slug codex 0.169.0 knows: it then offers its freeform apply_patch tool and warns of nothing.
SANDBOX_CODEX_MODEL = "gpt-5.5"

# How often a waiting handler (delay, hang) looks at the client and at stop().
_POLL_S = 0.05


# --- pointing the CLIs at a server ----------------------------------------------------------


def claude_env(server_url: str, home: Path) -> dict[str, str]:
    """Variables that send Claude Code's model traffic to ``server_url`` and nowhere else.

    ``home`` becomes HOME, so settings and transcripts (``~/.claude``) stay in it. Merge over an
    environment without other ``ANTHROPIC_*``/``CLAUDE_*`` variables. ``IS_SANDBOX`` is set when
    running as root, where ``--dangerously-skip-permissions`` needs it.
    """
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": server_url,
        "ANTHROPIC_API_KEY": SANDBOX_API_KEY,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return env


def codex_config_args(server_url: str) -> list[str]:
    """``codex exec`` arguments defining a Responses-API provider at ``server_url`` and using it."""
    provider = f"model_providers.{SANDBOX_CODEX_PROVIDER}"
    return [
        "-c",
        f'model_provider="{SANDBOX_CODEX_PROVIDER}"',
        "-c",
        f'{provider}.name="thirdshift sandbox"',
        "-c",
        f'{provider}.base_url="{server_url}/v1"',
        "-c",
        f'{provider}.wire_api="responses"',
        "-c",
        f'{provider}.env_key="{SANDBOX_CODEX_KEY_VAR}"',
        "-m",
        SANDBOX_CODEX_MODEL,
    ]


def codex_env(codex_home: Path) -> dict[str, str]:
    """Variables for codex: its home (config, sessions) and the provider's dummy key."""
    return {"CODEX_HOME": str(codex_home), SANDBOX_CODEX_KEY_VAR: SANDBOX_API_KEY}


def qwen_env(server_url: str, home: Path) -> dict[str, str]:
    """Variables that send Qwen Code's model traffic to ``server_url`` over Anthropic Messages
    (its ``--auth-type anthropic``, the adapter's default). ``home`` becomes HOME, and its
    ``.qwen`` QWEN_HOME, so settings and transcripts stay in it."""
    return {
        "HOME": str(home),
        "QWEN_HOME": str(home / ".qwen"),
        "ANTHROPIC_BASE_URL": server_url,
        "ANTHROPIC_API_KEY": SANDBOX_API_KEY,
    }


# --- the server -----------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], owner: ScriptedModelServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler)


class ScriptedModelServer:
    """Plays ``script`` to whichever CLI connects; logs each request to ``request_log``."""

    def __init__(
        self, script: ModelScript, request_log: Path, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._script = script
        self._log_path = request_log
        self._address = (host, port)
        self._lock = threading.Lock()
        self._cursors = [0] * len(script.sessions)
        self._claimed: set[int] = set()
        self._conversations: dict[str, int] = {}
        self._records: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._open: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Tool-call ids carry this server's nonce and the session index, so a later request that
        # echoes them back is known to continue that session.
        self._nonce = os.urandom(4).hex()
        self._call_id = re.compile(rf"_{self._nonce}_\d+_s(\d+)$")
        self._counter = 0

    # lifecycle

    def start(self) -> None:
        if self._httpd is not None:
            raise SandboxError("the scripted model server is already started")
        try:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_path.touch()
            httpd = _HTTPServer(self._address, self)
        except OSError as exc:
            raise SandboxError(
                f"scripted model server cannot start on {self._address[0]}:{self._address[1]} "
                f"with request log {self._log_path}: {exc.strerror or exc}"
            ) from exc
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="scripted-model-server",
        )
        self._thread.start()

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._open)
        for conn in conns:  # ends keep-alive connections and hanging answers
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise SandboxError("the scripted model server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def requests(self) -> list[dict[str, Any]]:
        """The requests recorded so far, oldest first (the same records as the log lines)."""
        with self._lock:
            return [dict(record) for record in self._records]

    # used by the handler

    @property
    def stopping(self) -> threading.Event:
        return self._stopping

    def track(self, conn: socket.socket, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._open.add(conn)
            else:
                self._open.discard(conn)

    def choose(self, api: wire.Api, body: dict[str, Any]) -> tuple[int | None, int | None, Turn]:
        """The session (index) a model request belongs to, the turn index, the turn to play."""
        with self._lock:
            index = self._session_for(api, body)
            if index is None:
                return None, None, Turn(kind="text", text=self._script.final_text)
            session = self._script.sessions[index]
            cursor = self._cursors[index]
            self._cursors[index] = cursor + 1
            if cursor < len(session.turns):
                return index, cursor, session.turns[cursor]
            return index, None, Turn(kind="text", text=session.final_text)

    def _session_for(self, api: wire.Api, body: dict[str, Any]) -> int | None:
        sessions = self._script.sessions
        text = wire.prompt_text(api, body)
        # A conversation that has made a tool call stays in its session, spent or not.
        for call_id in wire.echoed_call_ids(api, body):
            match = self._call_id.search(call_id)
            if match and int(match.group(1)) < len(sessions):
                return int(match.group(1))
        # A later prompt may quote an earlier session's (a preamble's brief), so several markers
        # can match: a session with turns left beats a spent one, then the marker that ends
        # furthest into the text (the newest instruction follows what it quotes).
        found = [
            (self._cursors[index] < len(session.turns), end, -index)
            for index, session in enumerate(sessions)
            if session.marker is not None
            and (end := text.rfind(session.marker) + len(session.marker)) >= len(session.marker)
        ]
        if found:
            return -max(found)[2]
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in self._conversations:
            return self._conversations[key]
        for index, session in enumerate(sessions):
            if session.marker is None and index not in self._claimed:
                self._claimed.add(index)
                self._conversations[key] = index
                return index
        return None

    def session_name(self, index: int | None) -> str | None:
        return None if index is None else self._script.sessions[index].name

    def reply_for(self, api: wire.Api, index: int | None, turn: Turn) -> wire.ModelReply:
        """The turn's text and tool calls, each call given an id that names its session."""
        index = -1 if index is None else index
        calls: list[tuple[str, ScriptedToolCall]] = []
        with self._lock:
            for call in turn.tool_calls:
                self._counter += 1
                prefix = "toolu" if api == "anthropic" else "call"
                calls.append((f"{prefix}_{self._nonce}_{self._counter}_s{index}", call))
        return wire.ModelReply(text=turn.text, calls=tuple(calls))

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, default=str)
        with self._lock:
            self._records.append(entry)
            with self._log_path.open("a", encoding="utf-8") as log:
                log.write(line + "\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "thirdshift-sandbox-model/1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is the record."""

    def setup(self) -> None:
        super().setup()
        self.server.owner.track(self.connection, True)

    def finish(self) -> None:
        self.server.owner.track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    # dispatch

    def _dispatch(self) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path.rstrip("/")
        raw = self._read_body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
        api: wire.Api = (
            "openai" if path.startswith("/v1/responses") or self._looks_openai() else "anthropic"
        )
        entry: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "method": self.command,
            "path": self.path,
            "api": api,
            "session": None,
            "turn": None,
            "kind": None,
            "body": body,
            # The credential the request carried, so a test can say who sent which key.
            "key": self._credential(),
        }
        if self.command == "POST" and path == "/v1/messages/count_tokens":
            entry["kind"] = "count_tokens"
            owner.record(entry)
            self._send_json(200, {"input_tokens": wire.estimate_tokens(raw)})
        elif self.command == "POST" and path in ("/v1/messages", "/v1/responses"):
            self._model_request(api, raw, body if isinstance(body, dict) else {}, entry)
        elif self.command in ("GET", "HEAD") and path == "/v1/models":
            entry["kind"] = "models"
            owner.record(entry)
            self._send_json(200, self._models(api))
        elif self.command in ("GET", "HEAD") and path in ("", "/", "/health", "/v1"):
            entry["kind"] = "probe"
            owner.record(entry)
            self._send_json(200, {"ok": True})
        else:
            entry["kind"] = "not_found"
            owner.record(entry)
            self._send_json(404, wire.not_found_body(api, self.command, self.path))

    def _credential(self) -> str | None:
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip() or None

    def _looks_openai(self) -> bool:
        return "anthropic-version" not in self.headers and "x-api-key" not in self.headers

    def _models(self, api: wire.Api) -> dict[str, Any]:
        if api == "anthropic":
            model = {
                "type": "model",
                "id": "claude-sandbox",
                "display_name": "Scripted sandbox model",
                "created_at": "2025-01-01T00:00:00Z",
            }
            return {
                "data": [model],
                "has_more": False,
                "first_id": model["id"],
                "last_id": model["id"],
            }
        return {
            "object": "list",
            "data": [
                {
                    "id": SANDBOX_CODEX_MODEL,
                    "object": "model",
                    "created": 0,
                    "owned_by": "thirdshift",
                }
            ],
        }

    def _model_request(
        self, api: wire.Api, raw: bytes, body: dict[str, Any], entry: dict[str, Any]
    ) -> None:
        owner = self.server.owner
        session_index, turn_index, turn = owner.choose(api, body)
        entry.update(
            session=owner.session_name(session_index),
            turn=turn_index,
            kind=turn.kind if turn_index is not None else "final",
        )
        owner.record(entry)
        if turn.delay_ms and not self._wait(turn.delay_ms / 1000):
            return
        if turn.kind == "hang":
            self._wait(None)
            return
        if turn.kind == "error":
            status, headers, error_body = wire.error_response(api, turn)
            self._send_json(status, error_body, headers)
            return
        reply = owner.reply_for(api, session_index, turn)
        model = str(body.get("model") or "sandbox-model")
        tokens = turn.input_tokens if turn.input_tokens is not None else wire.estimate_tokens(raw)
        if body.get("stream"):
            events = (
                wire.anthropic_events(model, reply, tokens)
                if api == "anthropic"
                else wire.openai_events(model, reply, tokens)
            )
            self._send_stream(events)
        elif api == "anthropic":
            self._send_json(200, wire.anthropic_message(model, reply, tokens))
        else:
            self._send_json(200, wire.openai_response(model, reply, tokens))

    # I/O

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        else:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
        encoding = self.headers.get("content-encoding", "").lower()
        with contextlib.suppress(OSError, zlib.error, EOFError):
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
        return raw

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status, _reason(status))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _send_stream(self, events: Any) -> None:
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for chunk in events:
                self.wfile.write(chunk)
                self.wfile.flush()
        except OSError:
            pass

    def _wait(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (forever if None); False if the client left or the server stops."""
        stopping = self.server.owner.stopping
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            remaining = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            if remaining <= 0:
                return True
            if stopping.wait(remaining) or self._client_gone():
                self.close_connection = True
                return False

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


def _reason(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
