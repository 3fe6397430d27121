"""The model gateway, for real: a session's egress proxy on its Unix socket, raw HTTP from a
client as a CLI would send it, and a real provider stand-in on the host's loopback that
records what reached it (adr/0038)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses.egress import EgressProxy
from thirdshift.harnesses.model_gateway import (
    GATEWAY_URL,
    STAND_IN_KEY,
    ModelGateway,
    ModelKeyInside,
    Route,
    variables_behind_gateway,
)
from thirdshift.network import EgressAllowlist

KEY = "sk-ant-api03-the-real-key-0123456789"


class Provider:
    """An HTTP server that records each request's path, headers and body, and answers 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while (size := int(self.rfile.readline().strip(), 16)) > 0:
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                else:
                    body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                owner.requests.append((self.command, self.path, headers, body))
                answer = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def provider() -> Iterator[Provider]:
    server = Provider()
    yield server
    server.close()


@pytest.fixture
def proxy(provider: Provider) -> Iterator[EgressProxy]:
    route = Route(name="anthropic", upstream=f"{provider.url}/base", key=KEY)
    with EgressProxy(EgressAllowlist.of((), ()), gateway=ModelGateway([route])) as opened:
        yield opened


def exchange(socket_path: Path, request: bytes) -> bytes:
    """Send ``request`` on one connection to the proxy and read its answer to the end."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(socket_path))
        client.sendall(request)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        return answer


def test_the_stand_in_key_reaches_the_provider_as_the_real_key(
    proxy: EgressProxy, provider: Provider
) -> None:
    """A request to the gateway's route goes to the provider's base URL and path, with the real
    key where the CLI sent the stand-in, and the provider's answer comes back."""
    body = b'{"model": "m"}'
    answer = exchange(
        proxy.socket_path,
        b"POST /anthropic/v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n"
        + f"x-api-key: {STAND_IN_KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body,
    )
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b'{"ok": true}')
    ((method, path, headers, sent),) = provider.requests
    assert (method, path, sent) == ("POST", "/base/v1/messages?beta=true", body)
    assert headers["x-api-key"] == KEY
    assert headers["host"] == provider.url.removeprefix("http://")


def test_a_bearer_stand_in_is_swapped_in_an_absolute_form_request(
    proxy: EgressProxy, provider: Provider
) -> None:
    """A CLI that sends its gateway requests through HTTP_PROXY (absolute form naming the
    gateway's address) is served the same way, bearer tokens included."""
    exchange(
        proxy.socket_path,
        f"GET {GATEWAY_URL}/anthropic/v1/models HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n"
        f"Authorization: Bearer {STAND_IN_KEY}\r\n\r\n".encode(),
    )
    ((_method, path, headers, _body),) = provider.requests
    assert path == "/base/v1/models"
    assert headers["authorization"] == f"Bearer {KEY}"


def test_a_credential_the_agent_sends_itself_is_dropped(
    proxy: EgressProxy, provider: Provider
) -> None:
    """Any credential header that does not carry the stand-in key never reaches the provider,
    nor does a proxy credential."""
    exchange(
        proxy.socket_path,
        b"GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: sk-ant-stolen-elsewhere\r\n"
        b"Authorization: Basic c3RvbGVu\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
    )
    ((_method, _path, headers, _body),) = provider.requests
    assert "x-api-key" not in headers
    assert "authorization" not in headers
    assert "proxy-authorization" not in headers


def test_a_second_request_pipelined_on_the_connection_never_reaches_the_provider(
    proxy: EgressProxy, provider: Provider
) -> None:
    """One request a connection: what follows the first request's body is dropped, so it can
    never reach the provider without the gateway's rewrite."""
    first = b"hello"
    exchange(
        proxy.socket_path,
        b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\n"
        + f"x-api-key: {STAND_IN_KEY}\r\nContent-Length: {len(first)}\r\n\r\n".encode()
        + first
        + b"GET /elsewhere HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    )
    assert [(m, p) for m, p, _h, _b in provider.requests] == [("POST", "/base/v1/messages")]


def test_a_chunked_body_is_forwarded_whole(proxy: EgressProxy, provider: Provider) -> None:
    """A body in chunked encoding is forwarded to its last chunk."""
    exchange(
        proxy.socket_path,
        b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        + f"x-api-key: {STAND_IN_KEY}\r\n\r\n".encode()
        + b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    ((_method, _path, _headers, body),) = provider.requests
    assert body == b"hello world"


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /nowhere/v1/models HTTP/1.1\r\nHost: x\r\n\r\n", b"404"),
        (
            b"POST /anthropic/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            b"400",
        ),
        (b"POST /anthropic/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n", b"400"),
    ],
    ids=["unknown-route", "length-and-chunked", "length-not-a-number"],
)
def test_a_request_the_gateway_cannot_forward_safely_is_answered_and_not_sent(
    proxy: EgressProxy, provider: Provider, head: bytes, status: bytes
) -> None:
    """An unknown route, or a body whose framing two servers could read two ways, is refused."""
    answer = exchange(proxy.socket_path, head)
    assert answer.split(b" ")[1] == status
    assert provider.requests == []


def test_a_session_with_no_gateway_answers_a_model_request_with_an_error() -> None:
    """Without a gateway (the agent holds its key), a request to the proxy's own address is
    answered, never forwarded anywhere."""
    with EgressProxy(EgressAllowlist.of((), ())) as proxy:
        answer = exchange(proxy.socket_path, b"GET /anthropic/v1 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")


def test_a_cli_reading_its_key_from_variables_gets_the_stand_in_and_the_gateway_the_key() -> None:
    """The key's variable holds the stand-in, the base URL points at the gateway, and the
    route goes to the configured provider with the real key."""
    plan = variables_behind_gateway(
        {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "https://models.example/v1"},
        name="anthropic",
        base_url_variable="ANTHROPIC_BASE_URL",
        default_upstream="https://api.anthropic.com",
        key_variables=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
        login="its login",
    )
    env = plan.environment({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_AUTH_TOKEN": "other", "X": "1"})
    assert env == {
        "ANTHROPIC_API_KEY": STAND_IN_KEY,
        "ANTHROPIC_BASE_URL": f"{GATEWAY_URL}/anthropic",
        "X": "1",
    }
    assert plan.routes == (Route("anthropic", "https://models.example/v1", KEY),)


def test_a_cli_with_no_key_but_a_login_cannot_start_with_its_key_outside() -> None:
    """No key in any variable: the CLI would read its login inside the sandbox, which the
    gateway cannot hold; the error names both fixes."""
    with pytest.raises(ModelKeyInside) as raised:
        variables_behind_gateway(
            {},
            name="anthropic",
            base_url_variable="ANTHROPIC_BASE_URL",
            default_upstream="https://api.anthropic.com",
            key_variables=("ANTHROPIC_API_KEY",),
            login="its login (~/.claude/.credentials.json)",
        )
    assert "set a key in one of those variables" in str(raised.value)
    assert "unsafe_agent_holds_model_key = true" in str(raised.value)


def test_a_key_with_a_line_break_is_refused_before_it_could_split_a_header() -> None:
    """A key that would end a header line early is never put in one."""
    with pytest.raises(ThirdshiftError, match="line break"):
        Route("anthropic", "https://api.anthropic.com", "sk-ant-x\r\nX-Evil: 1")


def test_a_cli_tunnelling_to_the_gateway_address_is_served_by_the_gateway(
    proxy: EgressProxy, provider: Provider
) -> None:
    """A CLI that opens a CONNECT tunnel even for a plain-http base URL (Qwen Code does) has
    the one request inside it served by the gateway, and nothing else."""
    answer = exchange(
        proxy.socket_path,
        b"CONNECT 127.0.0.1:3128 HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n"
        b"GET /anthropic/v1/models HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n"
        + f"x-api-key: {STAND_IN_KEY}\r\n\r\n".encode(),
    )
    assert answer.startswith(b"HTTP/1.1 200 Connection Established")
    ((_method, path, headers, _body),) = provider.requests
    assert (path, headers["x-api-key"]) == ("/base/v1/models", KEY)


def test_a_codex_provider_on_the_command_line_leaves_every_key_variable_outside() -> None:
    """Codex with a provider given by ``-c``: its env_key variable holds the stand-in, the
    default provider's OPENAI_API_KEY is dropped, and a provider whose key variable is unset
    gets no route and no key."""
    from thirdshift.harnesses.codex import CodexHarness

    codex = CodexHarness(
        extra_args=(
            "-c",
            'model_providers.local.base_url="http://10.0.0.5:8000/v1"',
            "-c",
            'model_providers.local.env_key="LOCAL_KEY"',
            "-c",
            'model_providers.other.base_url="http://10.0.0.6:8000/v1"',
            "-c",
            'model_providers.other.env_key="OTHER_KEY"',
        )
    )
    env = {"OPENAI_API_KEY": "sk-real-openai", "LOCAL_KEY": KEY, "OTHER_KEY": ""}
    plan = codex.behind_gateway(env)
    inside = plan.environment(env)
    assert inside == {"LOCAL_KEY": STAND_IN_KEY}
    assert plan.routes == (Route("p0", "http://10.0.0.5:8000/v1", KEY),)
    assert plan.argv(list(codex.extra_args))[1] == (
        f'model_providers.local.base_url="{GATEWAY_URL}/p0"'
    )


def test_an_opencode_provider_with_a_credential_header_cannot_start_with_its_key_outside(
    tmp_path: Path,
) -> None:
    """A key in options.headers is one the gateway does not hold: refused, naming apiKey as
    the fix; and behind the gateway no opencode.json (which may hold keys) is copied home."""
    import json

    from thirdshift.harnesses.opencode import OpenCodeHarness

    config = {"provider": {"corp": {"options": {"headers": {"Authorization": "Bearer s-1"}}}}}
    with pytest.raises(ModelKeyInside, match=r"give its key as options\.apiKey"):
        OpenCodeHarness().behind_gateway({"OPENCODE_CONFIG_CONTENT": json.dumps(config)})
    user = tmp_path / "user"
    (user / ".config" / "opencode").mkdir(parents=True)
    (user / ".config" / "opencode" / "opencode.json").write_text('{"apiKey": "sk-FILEKEY"}')
    home = tmp_path / "agent-home"
    OpenCodeHarness().private_home({"HOME": str(user)}, home, login=False)
    assert not list(home.rglob("opencode.json"))
    OpenCodeHarness().private_home({"HOME": str(user)}, home, login=True)
    assert list(home.rglob("opencode.json"))


def test_the_stand_in_inside_text_the_agent_chose_gets_no_key(
    proxy: EgressProxy, provider: Provider
) -> None:
    """The real key replaces the stand-in only as a CLI sends it (alone, or a bearer token),
    never spliced into a longer value the agent wrote."""
    exchange(
        proxy.socket_path,
        b"GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\n"
        + f"x-api-key: echo-{STAND_IN_KEY}-back\r\n".encode()
        + f"Authorization: Basic {STAND_IN_KEY}\r\n\r\n".encode(),
    )
    ((_method, _path, headers, _body),) = provider.requests
    assert "x-api-key" not in headers
    assert "authorization" not in headers


def test_codex_keeps_out_an_env_key_it_cannot_route_and_refuses_a_credential_in_its_argv() -> None:
    """An env_key variable of a provider given no base URL never enters the sandbox; a header
    or token given on the command line (readable in /proc inside) refuses the session."""
    from thirdshift.harnesses.codex import CodexHarness

    codex = CodexHarness(extra_args=("-c", 'model_providers.az.env_key="AZ_KEY"'))
    env = {"OPENAI_API_KEY": KEY, "AZ_KEY": "az-secret"}
    plan = codex.behind_gateway(codex.environment(env))
    assert "AZ_KEY" not in plan.environment(codex.environment(env))
    headers = 'model_providers.l.http_headers={Authorization="Bearer sk-LIT"}'
    with pytest.raises(ModelKeyInside, match=r"model_providers\.l\.http_headers"):
        CodexHarness(extra_args=("-c", headers)).behind_gateway(env)
