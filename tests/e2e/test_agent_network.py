"""The agent's network is sealed, tried end to end as a hostile session would: the real CLIs
of every Harness with scripted turns, run by the daemon (its status page served), the GitHub
stand-in, PostgreSQL, real git, bubblewrap, socat and the egress proxy. Every way out fails,
the session's model requests still reach the scripted model server, a host the repository
allows is reached, and the Run ends normally."""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.e2e.test_agent_keys import HUNT_RAN, credential_outputs, hostile_script
from tests.e2e.test_model_key_outside import (
    FIX,
    KEY,
    LOOT,
    configure,
    forms,
    leaked,
    model_records,
    pushed_files,
    shell,
)
from tests.e2e.test_status_page import free_port, wait_until_served
from tests.support.recorder import recording_server
from tests.support.run_world import (
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    start_world,
)
from tests.support.warm_start import Started
from thirdshift.harnesses.model_gateway import STAND_IN_KEY
from thirdshift.sandbox.model import ModelScript

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
REGISTRY_WORD = "registry-package-tarball"


class _Server:
    """An HTTP server on 127.0.0.1 that answers every GET with ``word`` and counts them."""

    def __init__(self, word: str) -> None:
        self.hits = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                body = word.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def servers() -> Iterator[dict[str, _Server]]:
    made = {
        "registry": _Server(REGISTRY_WORD),
        "stranger": _Server("a-stranger-service"),
        "rebinding": _Server("reached-through-a-name"),
    }
    yield made
    for server in made.values():
        server.close()


def hostile_commands(
    world: RunWorld, page_port: int, servers: dict[str, _Server], *, sealed: bool
) -> str:
    """Each way out, labelled: ``REACHED <what>`` when it got through, ``blocked <what>``
    when it did not. Direct attempts bypass the proxy; proxied ones go through it. Attempts
    at addresses off this machine are made only sealed, where no packet can leave the
    namespace (this workplace's tests send nothing beyond loopback)."""
    stand_in = world.stand_in.web_url
    stranger, rebinding = servers["stranger"].port, servers["rebinding"].port
    direct = "curl -s -m 3 --noproxy '*' -o /dev/null -w %{http_code}"
    proxied = "curl -sf -m 5 -x http://127.0.0.1:3128"
    udp = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); "
        "s.sendto(b'x', ('8.8.8.8', 53)); print(s.recvfrom(10))"
    )
    icmp = "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"
    attempts = {
        "postgres-tcp": "bash -c 'exec 3<>/dev/tcp/127.0.0.1/5432'",
        "postgres-unix": "test -S /run/postgresql/.s.PGSQL.5432 -o -S /tmp/.s.PGSQL.5432",
        "status-page": f"{direct} http://127.0.0.1:{page_port}/healthz",
        "status-page-proxied": f"{proxied} http://127.0.0.1:{page_port}/healthz",
        "stand-in-api": f"{direct} {stand_in}/api/v3/repos/{OWNER}/{NAME}",
        "stand-in-control": f"{direct} {stand_in}/_sandbox/users",
        "stand-in-control-proxied": f"{proxied} {stand_in}/_sandbox/users",
        "stranger-port": f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{stranger}'",
        "metadata": f"{direct} http://169.254.169.254/latest/meta-data/",
        "metadata-proxied": f"{proxied} http://169.254.169.254/latest/meta-data/",
        "public-host": "curl -sf -m 5 -x http://127.0.0.1:3128 https://example.com/",
        "name-to-loopback": f"{proxied} http://localhost:{rebinding}/",
        "udp": f'/usr/bin/python3 -c "{udp}"',
        "icmp": f'/usr/bin/python3 -c "{icmp}"',
    }
    if not sealed:
        for outside in ("metadata", "udp", "icmp"):
            del attempts[outside]
    # Each word is split in the command ("REACH""ED"), so only the output holds it whole:
    # the model server's log keeps both the command and what it printed.
    lines = ["set +e"]
    for label, command in attempts.items():
        lines.append(
            f'if out=$({command} 2>&1); then echo "REACH""ED {label}: $out"; '
            f'else echo "block""ed {label}"; fi'
        )
    lines.append(f'echo "allo""wed: $({proxied} http://127.0.0.1:{servers["registry"].port}/p)"')
    return "\n".join(lines)


def run_ended(world: RunWorld, daemon: Started, seconds: float = 240) -> str:
    """The state the daemon's Run ended in (it picks the issue up at its first poll)."""
    deadline = time.monotonic() + seconds
    database = world.home / "thirdshift.db"
    while time.monotonic() < deadline and daemon.poll() is None:
        if database.exists():
            with sqlite3.connect(database) as db:
                rows = db.execute("SELECT state FROM runs WHERE issue_number = 1").fetchall()
            if rows and rows[-1][0] not in ("running", "claimed"):
                return str(rows[-1][0])
        time.sleep(0.5)
    raise AssertionError("the daemon's Run did not end in time")


def network_events(world: RunWorld) -> list[str]:
    with sqlite3.connect(world.home / "thirdshift.db") as db:
        rows = db.execute("SELECT summary FROM session_events WHERE kind = 'network'").fetchall()
    return [str(row[0]) for row in rows]


@pytest.mark.usefixtures("cold_start")  # its hunt reads every process's environment
@pytest.mark.parametrize(
    ("harness", "sealed"),
    [("claude", True), ("codex", True), ("opencode", True), ("qwen", True), ("claude", False)],
    ids=[
        "claude-sealed",
        "codex-sealed",
        "opencode-sealed",
        "qwen-sealed",
        "claude-unsafe-agent-network",
    ],
)
def test_a_hostile_session_reaches_nothing_but_its_provider_and_allowed_hosts(
    tmp_path: Path,
    worlds: list[RunWorld],
    servers: dict[str, _Server],
    harness: str,
    sealed: bool,
) -> None:
    """Sealed, every attempt is blocked and the Run succeeds. With ``unsafe_agent_network``
    the same session reaches PostgreSQL, the status page and the stranger's port: proof that
    the test would catch a leak.

    Sealed, the same session of each Harness also hunts both secrets (one Run for the three
    hunts): the GitHub token (other processes, its home, git's credential helper, redirecting
    origin, a push of its own; test_agent_keys.py) and the model key (its environment, files
    and every process, all pushed base64-encoded and written into its pull request;
    test_model_key_outside.py). The token is in nothing it saw and the attacker's server gets
    no credential; the key is in none of what it saw, pushed or published, in any form, while
    every model request reached the provider with it from the gateway."""
    page_port = free_port()
    world = start_world(tmp_path, [])
    worlds.append(world)
    with recording_server("acme/calculator.git") as recorder:
        hunts = [hostile_commands(world, page_port, servers, sealed=sealed)]
        if sealed:
            hunts += [hostile_script(world, recorder.url), LOOT]
        turns = [
            *({"tool_calls": [shell(harness, hunt)]} for hunt in hunts),
            {"tool_calls": [shell(harness, FIX)]},
            {"text": "Fixed."},
        ]
        # The model server's address changes with its script: the Harness's settings come after.
        world.restart_model(
            ModelScript.from_dict(
                {"sessions": [{"name": "implement", "marker": MARKER, "turns": turns}]}
            )
        )
        configure(world, harness)
        rebinding = servers["rebinding"].port
        world.settings.update(
            {
                "THIRDSHIFT_POLL_SECONDS": "1",
                "THIRDSHIFT_POLL_JITTER_SECONDS": "0",
                "THIRDSHIFT_SETTLE_SECONDS": "0",
                "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
                # The registry by its address (the operator's word); the other by a name that
                # resolves to loopback, which the proxy refuses.
                "THIRDSHIFT_AGENT_NETWORK_ALLOW_BY_REPOSITORY": json.dumps(
                    {
                        f"{OWNER}/{NAME}": [
                            f"127.0.0.1:{servers['registry'].port}",
                            f"localhost:{rebinding}",
                        ]
                    }
                ),
            }
        )
        if not sealed:
            world.settings["THIRDSHIFT_UNSAFE_AGENT_NETWORK"] = "true"
        daemon = world.start_thirdshift(
            "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"127.0.0.1:{page_port}"
        )
        try:
            wait_until_served(f"http://127.0.0.1:{page_port}/", daemon)
            ended = run_ended(world, daemon)
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, stderr = daemon.communicate(timeout=120)
        stolen = [c for c in recorder.credentials() if TOKEN in c]

    seen = (world.tmp / "model.jsonl").read_text()
    assert "allowed:" in seen, f"the hostile commands did not run\n{stderr}"
    reached = sorted({line.split(":")[0] for line in seen.split("REACHED ")[1:]})
    if not sealed:
        assert {"postgres-tcp", "status-page", "stranger-port", "stand-in-control"} <= set(reached)
        return
    assert reached == [], f"got through: {reached}"
    for label in ("postgres-tcp", "status-page", "metadata-proxied", "udp", "icmp"):
        assert f"blocked {label}" in seen
    assert f"allowed: {REGISTRY_WORD}" in seen
    assert servers["stranger"].hits == 0
    assert servers["rebinding"].hits == 0
    assert servers["registry"].hits == 1
    assert daemon.returncode == 0, stderr
    assert ended == "succeeded", stderr
    assert world.pulls()[0]["head"]["ref"] == "issue-1"
    assert "agent network: refused connect to 169.254.169.254:80" in stderr
    assert f"agent network: refused connect to localhost:{rebinding} (it resolves to a " in stderr
    events = network_events(world)
    if harness == "qwen":  # its own hosts (telemetry, updates) are never even tried
        assert not [e for e in events if "aliyun" in e or "qwen" in e or "alibaba" in e], events
    assert "agent network: refused connect to 169.254.169.254:80 (not on the Egress allowlist)" in (
        events
    )
    assert f"agent network: refused connect to 127.0.0.1:{page_port} (not on the Egress " in (
        "\n".join(events)
    )

    # The token: in nothing the session saw, and no credential reached the attacker.
    assert HUNT_RAN in seen, "the token hunt did not run"
    assert TOKEN not in seen
    assert stolen == []
    credentials = credential_outputs(seen)
    assert credentials, "git credential fill printed nothing the model saw"
    assert not [found for found in credentials if "password=" in found]
    assert "stolen" not in world.git("ls-remote", "--heads", world.remote_url)

    # The model key: every model request carried it, from the gateway alone.
    records = model_records(world)
    model_calls = [r for r in records if r.get("kind") not in ("probe", "not_found")]
    assert model_calls, "no model request reached the scripted server"
    assert {r["key"] for r in model_calls} == {KEY}
    # What the session saw (the tool results travel in the requests' bodies) holds no key.
    bodies = json.dumps([r["body"] for r in records])
    assert "== loot" in bodies, "the model key's hunt did not run"
    assert STAND_IN_KEY in bodies, "the session did not see where its key would be"
    assert leaked(bodies) == []
    assert "loot.b64" in world.git(
        "ls-tree", "-r", "--name-only", "origin/issue-1", cwd=world.clone()
    )
    pushed = pushed_files(world)
    assert leaked(pushed) == []
    loot = base64.b64decode((world.clone() / "loot.b64").read_text())
    assert b"ANTHROPIC" in loot or b"OPENAI" in loot or b"OPENCODE" in loot or b"SANDBOX" in loot
    loot_text, pulls = loot.decode(errors="replace"), json.dumps(world.pulls())
    assert leaked(loot_text) == []
    assert leaked(pulls) == []
    # Nor the token, in any of those forms, in what was pushed or published.
    published = [loot_text, pushed, pulls]
    assert [form for form in forms(TOKEN) for text in published if form in text] == []
    logs = "\n".join(p.read_text(errors="replace") for p in (world.home / "logs").glob("*"))
    assert leaked(logs + stderr) == []
