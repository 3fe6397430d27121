"""What the sealed network costs a session's model requests: the egress proxy and its bridge.

Run from the repository root: ``.venv/bin/python bench/egress_proxy.py [--requests N]``.

An HTTP server on 127.0.0.1 stands in for the model provider (a 20 KB request, a 2 KB answer,
like a small Messages call). The same client (the system's python3) sends N requests three
ways and times each one:

- **direct**: unsealed, straight to the server, one connection a request and kept alive (the
  floors of the two sealed ways);
- **plain HTTP, sealed**: from inside bubblewrap's network namespace, through the socat bridge
  and the egress proxy, one connection a request (the proxy closes each; an http base URL);
- **tunnel, sealed**: one ``CONNECT`` through the same path, then keep-alive requests inside it
  (what an https provider's client does).

It prints the median and 90th percentile of each and the median overhead over its direct
floor. Figures, not assertions: no test depends on them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from thirdshift.harnesses import SealedPaths, probe
from thirdshift.harnesses.egress import EgressProxy
from thirdshift.network import EgressAllowlist

ANSWER = b"x" * 2048

CLIENT = r"""
import json, socket, sys, time
mode, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = b"y" * 20000
def request(target):
    return (f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
def read_answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    sizes = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
    length = int(sizes[0].split(b":")[1])
    while len(rest) < length:
        rest += s.recv(65536)
def connected(address):
    s = socket.create_connection(address)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as node and reqwest do
    return s
times = []
if mode in ("tunnel", "kept"):
    if mode == "kept":
        s = connected(("127.0.0.1", port))
    else:
        s = connected(("127.0.0.1", 3128))
        s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(1024)
    for _ in range(count):
        started = time.perf_counter()
        s.sendall(request("/v1/messages"))
        read_answer(s)
        times.append(time.perf_counter() - started)
else:
    for _ in range(count):
        started = time.perf_counter()
        if mode == "direct":
            s = connected(("127.0.0.1", port))
            s.sendall(request("/v1/messages"))
        else:
            s = connected(("127.0.0.1", 3128))
            s.sendall(request(f"http://127.0.0.1:{port}/v1/messages"))
        read_answer(s)
        s.close()
        times.append(time.perf_counter() - started)
print(json.dumps(times))
"""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per answer, as a provider's server makes it: a head and a body written apart
    # would meet Nagle and a delayed ACK on a kept-alive connection (40 ms), on any path.
    wbufsize = 65536

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *_args: object) -> None:
        pass


def _times(argv: list[str], env: dict[str, str] | None = None) -> list[float]:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=600)
    return [float(t) for t in json.loads(done.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    count = parser.parse_args().requests
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        raise SystemExit("the system's python3 is needed (it runs inside the sandbox)")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = str(server.server_address[1])
    sandbox = probe(None)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        paths = SealedPaths(worktree=root / "w", clone=root / "c", agent_home=root / "h", hidden=())
        for directory in (paths.worktree, paths.clone, paths.agent_home):
            directory.mkdir()
        results["direct"] = _times([python, "-c", CLIENT, "direct", port, str(count)])
        results["direct, kept alive"] = _times([python, "-c", CLIENT, "kept", port, str(count)])
        allowlist = EgressAllowlist.of([f"127.0.0.1:{port}"])
        for mode, label in (("proxy", "plain HTTP, sealed"), ("tunnel", "tunnel, sealed")):
            with EgressProxy(allowlist) as proxy:
                argv, env = sandbox.wrap(
                    [python, "-c", CLIENT, mode, port, str(count)],
                    {"PATH": "/usr/bin:/bin"},
                    paths,
                    proxy.socket_path,
                )
                results[label] = _times(argv, env)
    server.shutdown()
    print(f"{count} requests each (20 KB up, 2 KB down), on 127.0.0.1")
    print(f"{'path':<20} {'median':>10} {'p90':>10} {'overhead':>10}")
    for label, times in results.items():
        kept = "tunnel" in label or "kept" in label
        floor = statistics.median(results["direct, kept alive" if kept else "direct"])
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(
            f"{label:<20} {median * 1000:>8.2f}ms {p90 * 1000:>8.2f}ms "
            f"{(median - floor) * 1000:>+8.2f}ms"
        )


if __name__ == "__main__":
    main()
