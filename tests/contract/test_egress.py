"""The egress proxy and the sealed network, for real: bubblewrap's network namespace, the socat
bridge, the proxy on its Unix socket, and real listeners on the host's loopback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from thirdshift.harnesses import SealedPaths, probe
from thirdshift.harnesses.egress import MAX_REPORTS, EgressProxy, Refusal
from thirdshift.network import EgressAllowlist

SYSTEM_PYTHON = Path("/usr/bin/python3")
"""Outside every hidden directory, so a sealed process can run it (the suite's own Python lies
in a home the sandbox hides)."""


class Greeter:
    """A TCP port on 127.0.0.1 that greets each connection and counts them."""

    def __init__(self) -> None:
        self.word = b"greetings-from-the-host"
        self.connections = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = int(self._socket.getsockname()[1])
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with connection:
                connection.sendall(self.word + b"\n")
                connection.settimeout(0.5)
                try:
                    echoed = connection.recv(1024)
                    if echoed:
                        connection.sendall(b"echo:" + echoed)
                except OSError:
                    pass

    def close(self) -> None:
        self._done.set()
        self._thread.join(5)
        self._socket.close()


@pytest.fixture
def greeter() -> Iterator[Greeter]:
    server = Greeter()
    yield server
    server.close()


@pytest.fixture
def stranger() -> Iterator[Greeter]:
    """Another service on the host's loopback that no allowlist names."""
    server = Greeter()
    yield server
    server.close()


class Names:
    """A resolver that knows what the test tells it."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def resolve(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        return self.table.get(host, [])


def exchange(proxy: EgressProxy, request: bytes) -> bytes:
    """What the proxy answers ``request`` with, read until it closes (or 5 s)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(str(proxy.socket_path))
        client.sendall(request)
        answer = b""
        try:
            while chunk := client.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
        return answer


def test_connect_to_an_allowed_address_tunnels_both_ways(greeter: Greeter) -> None:
    allowlist = EgressAllowlist.of([f"127.0.0.1:{greeter.port}"])
    with (
        EgressProxy(allowlist) as proxy,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client,
    ):
        client.settimeout(5)
        client.connect(str(proxy.socket_path))
        client.sendall(f"CONNECT 127.0.0.1:{greeter.port} HTTP/1.1\r\n\r\n".encode())
        answer = b""
        while greeter.word not in answer:
            answer += client.recv(1024)
        client.sendall(b"ping")
        while b"echo:ping" not in answer:
            answer += client.recv(1024)
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\n")


def test_plain_http_reaches_the_allowed_server_in_origin_form_one_request_a_connection() -> None:
    """Claude Code and Codex send an http base URL's requests to the proxy in absolute form;
    the server behind gets an ordinary request, without the proxy's own headers, its Host the
    target's (no other virtual host on the allowed address), told to close after it."""
    seen: list[tuple[str, str | None, str, str | None, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(
                (
                    self.path,
                    self.headers.get("Host"),
                    body.decode(),
                    self.headers.get("Proxy-Connection"),
                    self.headers.get("Connection"),
                )
            )
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        with EgressProxy(EgressAllowlist.of([f"127.0.0.1:{port}"])) as proxy:
            answer = exchange(
                proxy,
                f"POST http://127.0.0.1:{port}/v1/messages?beta=true HTTP/1.1\r\n"
                "Host: another-virtual-host.example\r\nProxy-Connection: Keep-Alive\r\n"
                "Content-Length: 5\r\n\r\nhello".encode(),
            )
    finally:
        server.shutdown()
        server.server_close()
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"ok")
    assert seen == [("/v1/messages?beta=true", f"127.0.0.1:{port}", "hello", None, "close")]


def test_a_host_not_allowed_gets_a_403_naming_it_and_is_reported_once(stranger: Greeter) -> None:
    reports: list[Refusal] = []
    with EgressProxy(EgressAllowlist.of(["api.anthropic.com"]), on_refused=reports.append) as proxy:
        first = exchange(proxy, f"CONNECT 127.0.0.1:{stranger.port} HTTP/1.1\r\n\r\n".encode())
        exchange(proxy, f"CONNECT 127.0.0.1:{stranger.port} HTTP/1.1\r\n\r\n".encode())
        metadata = exchange(proxy, b"GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n")
        refused = proxy.refused
    assert first.startswith(b"HTTP/1.1 403 Forbidden")
    assert f"refused connect to 127.0.0.1:{stranger.port}".encode() in first
    assert metadata.startswith(b"HTTP/1.1 403 Forbidden")
    assert [report.line for report in reports] == [
        f"agent network: refused connect to 127.0.0.1:{stranger.port} (not on the Egress "
        "allowlist)",
        "agent network: refused connect to 169.254.169.254:80 (not on the Egress allowlist)",
    ]
    assert refused == 3
    assert stranger.connections == 0


def test_an_allowed_name_that_resolves_to_loopback_is_refused(greeter: Greeter) -> None:
    """DNS rebinding: the name is on the allowlist, its answer points at this machine."""
    names = Names({"models.example.com": ["127.0.0.1"]})
    reports: list[Refusal] = []
    allowlist = EgressAllowlist.of([f"models.example.com:{greeter.port}"])
    with EgressProxy(allowlist, on_refused=reports.append, resolver=names) as proxy:
        answer = exchange(
            proxy, f"CONNECT models.example.com:{greeter.port} HTTP/1.1\r\n\r\n".encode()
        )
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert names.asked == ["models.example.com"]
    assert reports[0].reason == "it resolves to a loopback address (127.0.0.1)"
    assert greeter.connections == 0


def test_a_name_not_allowed_is_never_resolved() -> None:
    names = Names({"exfil.example.net": ["93.184.215.14"]})
    with EgressProxy(EgressAllowlist.of(["api.openai.com"]), resolver=names) as proxy:
        exchange(proxy, b"CONNECT exfil.example.net:443 HTTP/1.1\r\n\r\n")
    assert names.asked == []


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"\x16\x03\x01 garbage that is no HTTP\r\n\r\n", b"400"),
        (b"GET /relative HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT :443 HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://example.com/ HTTP/1.1\r\nX: a\nConnection: keep-alive\r\n\r\n", b"400"),
        (b"CONNECT example.com:99999999 HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://example.com/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
    ],
)
def test_garbage_gets_a_clear_answer_and_the_proxy_keeps_serving(
    greeter: Greeter, request_bytes: bytes, status: bytes
) -> None:
    with EgressProxy(EgressAllowlist.of([f"127.0.0.1:{greeter.port}"])) as proxy:
        assert exchange(proxy, request_bytes).startswith(b"HTTP/1.1 " + status)
        again = exchange(proxy, f"CONNECT 127.0.0.1:{greeter.port} HTTP/1.1\r\n\r\n".encode())
    assert greeter.word in again


def test_a_report_that_raises_does_not_stop_the_proxy(greeter: Greeter) -> None:
    def failing(_refusal: Refusal) -> None:
        raise RuntimeError("the database is away")

    allowlist = EgressAllowlist.of([f"127.0.0.1:{greeter.port}"])
    with EgressProxy(allowlist, on_refused=failing) as proxy:
        assert exchange(proxy, b"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403")
        assert greeter.word in exchange(
            proxy, f"CONNECT 127.0.0.1:{greeter.port} HTTP/1.1\r\n\r\n".encode()
        )


def test_closing_the_proxy_removes_its_socket() -> None:
    proxy = EgressProxy(EgressAllowlist())
    with proxy:
        path = proxy.socket_path
        assert path.is_socket()
    assert not path.exists()
    assert not path.parent.exists()


# -- sealed: a process inside the sandbox --------------------------------------------------

# Run sealed with the system Python: every way out it can think of, each reported.
HOSTILE = r"""
import json, os, socket, sys
host_port, allowed_port, abstract = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# Addresses off this machine only where no packet can leave (sealed): tests send nothing
# beyond loopback.
beyond = sys.argv[4] == "sealed"
found = {}
def attempt(name, action):
    try:
        found[name] = "reached: " + repr(action())[:80]
    except Exception as error:
        found[name] = "failed: " + type(error).__name__
def tcp(address, port):
    with socket.create_connection((address, port), timeout=3) as s:
        return s.recv(100)
def udp(address):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        s.sendto(b"x", (address, 53))
        return s.recvfrom(100)
def icmp():
    return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def ping():
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
def unix_abstract():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("\0" + abstract)
        return s.recv(100)
def via_proxy(target):
    with socket.create_connection(("127.0.0.1", 3128), timeout=3) as s:
        s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\n\r\n")
        answer = b""
        while b"greetings" not in answer:  # a refusal ends with the proxy's close
            chunk = s.recv(200)
            if not chunk:
                break
            answer += chunk.replace(b"\r", b"")
        return answer
attempt("loopback tcp", lambda: tcp("127.0.0.1", host_port))
if beyond:
    attempt("host address tcp", lambda: tcp(socket.gethostbyname(socket.gethostname()), host_port))
if beyond:
    attempt("metadata", lambda: tcp("169.254.169.254", 80))
    attempt("udp dns", lambda: udp("8.8.8.8"))
attempt("udp loopback", lambda: udp("127.0.0.1"))
attempt("raw icmp", icmp)
attempt("ping socket", ping)
if beyond:
    attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("abstract unix", unix_abstract)
attempt("proxy allowed", lambda: via_proxy(f"127.0.0.1:{allowed_port}"))
attempt("proxy stranger", lambda: via_proxy(f"127.0.0.1:{host_port}"))
found["proxy variables"] = os.environ.get("HTTPS_PROXY", "") + " " + os.environ.get("NO_PROXY", "-")
print(json.dumps(found))
"""


def test_a_sealed_process_reaches_only_its_allowed_host_through_the_proxy(
    tmp_path: Path, greeter: Greeter, stranger: Greeter
) -> None:
    assert SYSTEM_PYTHON.exists(), "the system's python3 is needed (apt-get install python3)"
    assert shutil.which("socat"), "socat is required (apt-get install socat)"
    sandbox = probe(None)
    assert sandbox.network_sealed
    paths = SealedPaths(
        worktree=tmp_path / "worktree",
        clone=tmp_path / "clone",
        agent_home=tmp_path / "agent-home",
        hidden=(),
    )
    for directory in (paths.worktree, paths.clone, paths.agent_home):
        directory.mkdir()
    abstract_name = f"thirdshift-test-{tmp_path.name}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(1)
    reports: list[Refusal] = []
    try:
        with EgressProxy(
            EgressAllowlist.of([f"127.0.0.1:{greeter.port}"]), on_refused=reports.append
        ) as proxy:
            argv, env = sandbox.wrap(
                [
                    str(SYSTEM_PYTHON),
                    "-c",
                    HOSTILE,
                    str(stranger.port),
                    str(greeter.port),
                    abstract_name,
                    "sealed",
                ],
                {"PATH": "/usr/bin:/bin", "NO_PROXY": "*"},
                paths,
                proxy.socket_path,
            )
            done = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                cwd=paths.worktree,
            )
    finally:
        abstract.close()
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    reached = {name for name, what in found.items() if what.startswith("reached")}
    assert reached == {"proxy allowed", "proxy stranger"}, found
    assert "greetings-from-the-host" in found["proxy allowed"]
    assert "403 Forbidden" in found["proxy stranger"]
    assert found["proxy variables"] == "http://127.0.0.1:3128 -"
    assert stranger.connections == 0
    assert [report.port for report in reports] == [stranger.port]


def test_the_same_process_on_the_hosts_network_reaches_the_host(
    tmp_path: Path, stranger: Greeter
) -> None:
    """The control: with the network left shared (unsafe_agent_network), the hostile script
    above does reach the host's loopback, so its failures there are the seal's doing."""
    sandbox = probe(None, unsafe_network=True)
    assert not sandbox.network_sealed
    paths = SealedPaths(
        worktree=tmp_path, clone=tmp_path, agent_home=tmp_path / "agent-home", hidden=()
    )
    paths.agent_home.mkdir()
    argv, env = sandbox.wrap(
        [str(SYSTEM_PYTHON), "-c", HOSTILE, str(stranger.port), "1", "none", "unsealed"],
        {"PATH": "/usr/bin:/bin"},
        paths,
    )
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    found = json.loads(done.stdout)
    assert "greetings-from-the-host" in found["loopback tcp"]
    assert stranger.connections >= 1


def test_a_nul_in_the_host_does_not_pass_a_wildcard(greeter: Greeter) -> None:
    names = Names({"9.9.9.9": ["127.0.0.1"]})
    allowlist = EgressAllowlist.of([f"*.example.com:{greeter.port}"])
    with EgressProxy(allowlist, resolver=names) as proxy:
        answer = exchange(
            proxy, f"CONNECT 9.9.9.9\x00.example.com:{greeter.port} HTTP/1.1\r\n\r\n".encode()
        )
    assert answer.startswith(b"HTTP/1.1 403")
    assert names.asked == []
    assert greeter.connections == 0


def test_reports_are_capped_and_a_slow_one_holds_no_connection_up(greeter: Greeter) -> None:
    """A session that tries thousands of hosts gets MAX_REPORTS reports and one count; a report
    that takes seconds (a database write) does not delay an allowed connection."""
    reports: list[str] = []
    release = threading.Event()

    def slow(refusal: Refusal) -> None:
        release.wait(5)
        reports.append(refusal.line)

    allowlist = EgressAllowlist.of([f"127.0.0.1:{greeter.port}"])
    with EgressProxy(allowlist, on_refused=slow) as proxy:
        for n in range(MAX_REPORTS + 5):
            exchange(proxy, f"CONNECT host-{n}.example.net:443 HTTP/1.1\r\n\r\n".encode())
        allowed = exchange(proxy, f"CONNECT 127.0.0.1:{greeter.port} HTTP/1.1\r\n\r\n".encode())
        assert greeter.word in allowed
        release.set()
    assert len(reports) == MAX_REPORTS + 1
    assert reports[-1] == "agent network: refused connect to 5 more hosts"


def test_a_port_of_other_digits_gets_a_400(greeter: Greeter) -> None:
    with EgressProxy(EgressAllowlist.of([f"127.0.0.1:{greeter.port}"])) as proxy:
        answer = exchange(proxy, "CONNECT 127.0.0.1:8\u00b2 HTTP/1.1\r\n\r\n".encode("latin-1"))
    assert answer.startswith(b"HTTP/1.1 400")
