"""An attacker's HTTP server for the tests: it asks for credentials and records every
Authorization header it is sent, so a test can prove a token never reached it."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Recorder:
    url: str
    authorizations: list[str]

    def credentials(self) -> list[str]:
        """Every Authorization value, and the user:password of each Basic one, decoded."""
        decoded = []
        for value in self.authorizations:
            scheme, _, rest = value.partition(" ")
            if scheme.lower() == "basic":
                decoded.append(base64.b64decode(rest).decode(errors="replace"))
            decoded.append(value)
        return decoded


@contextmanager
def recording_server(path: str) -> Iterator[Recorder]:
    """Serve on a free loopback port; ``path`` is the repository path its URL names."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            if self.headers.get("Authorization"):
                seen.append(self.headers["Authorization"])
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield Recorder(f"http://127.0.0.1:{server.server_address[1]}/{path}", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
