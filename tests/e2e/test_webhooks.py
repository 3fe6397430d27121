"""Webhook deliveries end to end (adr/0046): `thirdshift daemon --http` with `webhook_secret`,
a poll interval of ten minutes, the GitHub stand-in, real git, PostgreSQL and the real claude
CLI. GitHub's published example of an ``issues.labeled`` delivery, adapted to the stand-in's
repository and signed, makes the daemon claim the issue long before any poll would; an
unsigned, a wrongly signed, a replayed and a 30 MB delivery are refused and change nothing; one
for a repository the daemon does not watch is ignored. Each says so in the Activity log."""

from __future__ import annotations

import copy
import hashlib
import hmac
import http.client
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import make_world, marker, stop, work_turns
from tests.e2e.test_status_page import free_port, wait_until_served
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

__all__ = ["make_world"]  # the fixture this file's test takes

SECRET = "webhook-secret-for-the-e2e-test-0123"
PAGE_TOKEN = "page-token-for-the-e2e-test-0123456"
EXAMPLE = Path(__file__).parents[1] / "fixtures" / "webhooks" / "issues-labeled.json"
NEVER = 600.0
"""The daemon's poll interval here: no poll comes during the test after the first ones."""


def labeled(full_name: str, number: int) -> bytes:
    """GitHub's example ``issues.labeled`` payload, about ``full_name``'s issue ``number``
    labelled ready-for-agent."""
    payload: dict[str, Any] = copy.deepcopy(json.loads(EXAMPLE.read_text()))
    owner, name = full_name.split("/")
    payload["repository"].update(full_name=full_name, name=name)
    payload["repository"]["owner"]["login"] = owner
    payload["issue"]["number"] = number
    payload["label"]["name"] = "ready-for-agent"
    return json.dumps(payload).encode()


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    port: int, body: bytes, *, signature: str | None, delivery: str | None = None
) -> tuple[int | None, str]:
    """POST ``body`` to the daemon's /webhook as GitHub would; its status and text (None and
    the error when the daemon closed the connection before reading it all)."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/e2e",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
    }
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/webhook", body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    except (BrokenPipeError, ConnectionResetError) as error:
        return None, str(error)
    finally:
        connection.close()


def test_a_signed_delivery_gets_a_claim_at_once_and_forged_ones_change_nothing(
    make_world: Any,
) -> None:
    world = make_world(
        [{"name": "alpha-1", "marker": marker("alpha", 1), "turns": work_turns("alpha", 1)}]
    )
    port = free_port()
    daemon = world.daemon(
        "home-hooks",
        "--http",
        f"127.0.0.1:{port}",
        poll_seconds=str(NEVER),
        poll_jitter_seconds="0",
        webhook_secret=SECRET,
        http_token=PAGE_TOKEN,
    )
    wait_until_served(f"http://127.0.0.1:{port}/", daemon)

    def listed(repo: str) -> bool:
        path = f"/repos/acme/{repo}/issues"
        return any(str(r["path"]).endswith(path) for r in list(world.stand_in.requests))

    world.wait_until(
        lambda: all(listed(r) for r in ("alpha", "beta", "gamma")), 60, "the first polls"
    )
    number = world.ready_issue("alpha", "Labelled while the daemon waits ten minutes")
    body = labeled("acme/alpha", number)

    def claimed() -> bool:
        return any(CLAIM_MARKER in c for c in world.comments("alpha", number))

    refusals = {
        "unsigned": deliver(port, body, signature=None),
        "wrongly signed": deliver(port, body, signature=sign(body, "another-secret-0123456")),
        "longer than": deliver(port, b"{" + b" " * (30 * 1024 * 1024) + b"}", signature=None),
    }
    assert refusals["unsigned"][0] == 401
    assert refusals["wrongly signed"][0] == 401
    assert refusals["longer than"][0] in {413, None}, refusals["longer than"]
    unwatched = labeled("acme/elsewhere", 1)
    assert deliver(port, unwatched, signature=sign(unwatched))[0] == 202
    time.sleep(2)
    assert not claimed(), "a delivery that was refused or ignored woke a poll"

    delivery = str(uuid.uuid4())
    sent = time.monotonic()
    assert deliver(port, body, signature=sign(body), delivery=delivery) == (
        202,
        "accepted issues.labeled\n",
    )
    # Behaviour, not speed (bench/pickup_latency.py measures it): claimed while the next poll
    # is still ten minutes away.
    world.wait_until(claimed, 60, "the claim after the delivery")
    assert time.monotonic() - sent < NEVER / 4
    replay = deliver(port, body, signature=sign(body), delivery=delivery)
    assert replay[0] == 400
    assert "replay" in replay[1]

    status, err = stop(daemon)
    assert status == 0, err[-3000:]
    store = Store.open(world.database_url, migrate=False)
    try:
        lines = [a.message for a in store.activity(limit=500) if a.kind == "webhook"]
        runs = store.list_runs(limit=50)
    finally:
        store.close()
    for said in ("unsigned", "wrongly signed", "longer than", "a replay"):
        assert sum(said in line for line in lines) == 1, (said, lines)
    assert sum("does not watch acme/elsewhere" in line for line in lines) == 1, lines
    # The backstop is never faster than the polls were (600 s here, over its 300 s default).
    assert any(
        "webhook deliveries arrive for acme/alpha: it is polled every 600s" in line
        for line in lines
    ), lines
    assert [(run.repository.name, run.issue_number) for run in runs] == [("alpha", number)]
    assert SECRET not in err
