"""What makes a webhook delivery believable: its signature, its shape, a new id; and which
deliveries are news for a poll."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from tests.unit.test_status_page import ScriptedSource, page
from thirdshift.web import StatusServer, make_app
from thirdshift.web.webhook import (
    MAX_DELIVERY_BYTES,
    REFUSALS_SAID_EVERY,
    REMEMBERED_DELIVERIES,
    DeliveryRefused,
    WebhookDelivery,
    WebhookInbox,
    check_signature,
    read_delivery,
    wakes_a_poll,
)

SECRET = "a-webhook-secret-of-some-length"
BODY = json.dumps(
    {"action": "labeled", "repository": {"full_name": "acme/widgets"}, "issue": {"number": 1}}
).encode()


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(body: bytes = BODY, delivery: str = "d-1", event: str = "issues") -> dict[str, str]:
    return {
        "x-hub-signature-256": signed(body),
        "x-github-delivery": delivery,
        "x-github-event": event,
    }


def test_a_body_signed_with_the_secret_passes() -> None:
    check_signature(SECRET.encode(), BODY, signed(BODY))


@pytest.mark.parametrize(
    ("header", "said"),
    [
        (None, "unsigned"),
        ("", "unsigned"),
        ("sha1=abc", "a form other than sha256"),
        ("sha256=", "a form other than sha256"),
        (signed(BODY, "another-secret-entirely"), "wrongly signed"),
        (signed(BODY + b" "), "wrongly signed"),
    ],
)
def test_a_body_unsigned_or_signed_otherwise_is_refused_with_401(
    header: str | None, said: str
) -> None:
    with pytest.raises(DeliveryRefused) as refused:
        check_signature(SECRET.encode(), BODY, header)
    assert refused.value.status == 401
    assert said in refused.value.reason


def test_a_delivery_names_its_event_action_and_repository() -> None:
    delivery = read_delivery(headers(), BODY)
    assert delivery == WebhookDelivery("d-1", "issues", "labeled", "acme/widgets")
    assert delivery.what == "issues.labeled"


def test_an_organisations_ping_names_no_repository() -> None:
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    delivery = read_delivery(headers(body, event="ping"), body)
    assert delivery.repository is None
    assert delivery.action is None
    assert delivery.what == "ping"


@pytest.mark.parametrize(
    ("given", "body", "said"),
    [
        ({"x-github-event": "issues"}, BODY, "X-GitHub-Delivery"),
        ({"x-github-delivery": "d-1"}, BODY, "X-GitHub-Event"),
        ({"x-github-delivery": "d-1", "x-github-event": "issues"}, b"not json", "not JSON"),
        ({"x-github-delivery": "d-1", "x-github-event": "issues"}, b"[1, 2]", "JSON object"),
    ],
)
def test_a_delivery_missing_its_headers_or_a_json_object_is_refused_with_400(
    given: dict[str, str], body: bytes, said: str
) -> None:
    with pytest.raises(DeliveryRefused) as refused:
        read_delivery(given, body)
    assert refused.value.status == 400
    assert said in refused.value.reason


@pytest.mark.parametrize(
    ("event", "action", "wakes"),
    [
        ("issues", "labeled", True),
        ("issues", "edited", True),
        ("issues", "closed", True),
        ("issues", "reopened", True),
        ("issues", "assigned", False),
        ("issue_comment", "created", True),
        ("pull_request_review", "submitted", True),
        ("pull_request_review_comment", "created", True),
        ("check_run", "completed", True),
        ("check_run", "created", False),
        ("check_suite", "completed", True),
        ("sub_issues", "sub_issue_added", True),
        ("ping", None, True),
        ("push", None, False),
        ("star", "created", False),
    ],
)
def test_only_news_a_poll_acts_on_wakes_it(event: str, action: str | None, wakes: bool) -> None:
    assert wakes_a_poll(WebhookDelivery("d", event, action, "acme/widgets")) is wakes


class Inbox:
    def __init__(self) -> None:
        self.delivered: list[WebhookDelivery] = []
        self.refused: list[str] = []
        self.inbox = WebhookInbox(
            SECRET, deliver=self.delivered.append, refused=self.refused.append
        )


def test_the_inbox_hands_on_a_signed_delivery_once_and_refuses_its_replay() -> None:
    box = Inbox()
    box.inbox.receive(headers(), BODY)
    with pytest.raises(DeliveryRefused) as refused:
        box.inbox.receive(headers(), BODY)
    assert refused.value.status == 400
    assert [d.id for d in box.delivered] == ["d-1"]
    assert box.refused == [
        "a webhook delivery was refused: a replay: its id came with an earlier delivery (this "
        "one says it is d-1)"
    ]


def test_a_signed_body_sent_again_under_a_new_id_is_a_replay_too() -> None:
    """The signature covers the body alone: whoever saw one delivery could send it again with
    a fresh ``X-GitHub-Delivery``."""
    box = Inbox()
    box.inbox.receive(headers(delivery="d-1"), BODY)
    with pytest.raises(DeliveryRefused) as refused:
        box.inbox.receive(headers(delivery="d-2"), BODY)
    assert refused.value.status == 400
    assert "its body came with an earlier delivery" in refused.value.reason
    assert [d.id for d in box.delivered] == ["d-1"]


def test_refusals_of_one_kind_are_said_once_in_five_minutes_with_how_many_were_not() -> None:
    """A stranger's flood of forged requests costs the Activity log (and its database) one line
    a kind every five minutes, not one a request."""
    now = [1000.0]
    said: list[str] = []
    inbox = WebhookInbox(
        SECRET, deliver=lambda _d: None, refused=said.append, monotonic=lambda: now[0]
    )
    unsigned = {k: v for k, v in headers().items() if k != "x-hub-signature-256"}
    for _ in range(50):
        with pytest.raises(DeliveryRefused):
            inbox.receive(unsigned, BODY)
    with pytest.raises(DeliveryRefused):
        inbox.receive({**headers(), "x-hub-signature-256": signed(BODY, "x" * 20)}, BODY)
    now[0] += REFUSALS_SAID_EVERY
    with pytest.raises(DeliveryRefused):
        inbox.receive(unsigned, BODY)
    assert said == [
        "a webhook delivery was refused: unsigned (no X-Hub-Signature-256 header)",
        "a webhook delivery was refused: wrongly signed: its signature does not match "
        "webhook_secret",
        "a webhook delivery was refused: unsigned (no X-Hub-Signature-256 header) (49 more "
        "like it were not said)",
    ]


def test_a_wrongly_signed_delivery_hands_on_nothing_and_does_not_spend_its_id() -> None:
    """A forger who learns a delivery id before GitHub sends it cannot block the real one."""
    box = Inbox()
    forged = {**headers(), "x-hub-signature-256": signed(BODY, "guessed-secret-of-length")}
    with pytest.raises(DeliveryRefused):
        box.inbox.receive(forged, BODY)
    box.inbox.receive(headers(), BODY)
    assert [d.id for d in box.delivered] == ["d-1"]
    assert len(box.refused) == 1
    assert "wrongly signed" in box.refused[0]


def body_of(number: int) -> bytes:
    return json.dumps({"action": "labeled", "issue": {"number": number}}).encode()


def test_the_inbox_remembers_a_bounded_number_of_deliveries() -> None:
    box = Inbox()
    for number in range(REMEMBERED_DELIVERIES + 1):
        box.inbox.receive(headers(body_of(number), delivery=f"d-{number}"), body_of(number))
    # The oldest is forgotten, so memory stays bounded; the newest is still refused.
    box.inbox.receive(headers(body_of(0), delivery="d-0"), body_of(0))
    last = REMEMBERED_DELIVERIES
    with pytest.raises(DeliveryRefused):
        box.inbox.receive(headers(body_of(last), delivery=f"d-{last}"), body_of(last))


def test_an_inbox_without_a_secret_cannot_be_made() -> None:
    with pytest.raises(ValueError, match="secret"):
        WebhookInbox("", deliver=lambda _d: None, refused=lambda _l: None)


# -- POST /webhook on the status page's application ---------------------------------------


def webhook_client(box: Inbox) -> TestClient:
    app = make_app(ScriptedSource([page()]), token="s3cret-token-s3cret-token", inbox=box.inbox)
    return TestClient(app, base_url="http://127.0.0.1:8765")


def test_a_signed_delivery_is_taken_without_the_page_token_and_answered_202() -> None:
    box = Inbox()
    answer = webhook_client(box).post("/webhook", content=BODY, headers=headers())
    assert answer.status_code == 202
    assert answer.text == "accepted issues.labeled\n"
    assert [d.what for d in box.delivered] == ["issues.labeled"]


def test_an_unsigned_delivery_is_refused_with_401_naming_why() -> None:
    box = Inbox()
    unsigned = {k: v for k, v in headers().items() if k != "x-hub-signature-256"}
    answer = webhook_client(box).post("/webhook", content=BODY, headers=unsigned)
    assert answer.status_code == 401
    assert "unsigned" in answer.text
    assert box.delivered == []


def test_a_body_over_the_cap_is_refused_unread() -> None:
    box = Inbox()
    body = b"{" + b" " * MAX_DELIVERY_BYTES + b"}"
    answer = webhook_client(box).post("/webhook", content=body, headers=headers(body))
    assert answer.status_code == 413
    assert box.delivered == []
    assert box.refused == [
        f"a webhook delivery was refused: longer than {MAX_DELIVERY_BYTES} bytes"
    ]


def test_a_chunked_body_over_the_cap_is_cut_off_as_it_arrives() -> None:
    """No Content-Length to refuse it by: the body is read until it passes the cap."""
    box = Inbox()

    def chunks() -> Iterator[bytes]:
        yield b"{"
        for _ in range(MAX_DELIVERY_BYTES // 65536 + 2):
            yield b" " * 65536
        yield b"}"

    answer = webhook_client(box).post("/webhook", content=chunks(), headers=headers())
    assert answer.status_code == 413
    assert box.delivered == []


def test_the_page_still_asks_for_its_token_beside_the_webhook() -> None:
    box = Inbox()
    client = webhook_client(box)
    assert client.get("/").status_code == 401
    assert client.get("/webhook").status_code == 405  # a delivery is a POST; nothing else


def test_without_an_inbox_there_is_no_webhook_route() -> None:
    app = make_app(ScriptedSource([page()]), token="s3cret-token-s3cret-token")
    answer = TestClient(app, base_url="http://127.0.0.1:8765").post(
        "/webhook", content=BODY, headers=headers()
    )
    assert answer.status_code == 401  # the token check, like any unknown path


def test_a_body_that_trickles_in_is_cut_off_and_its_connection_freed() -> None:
    """A stranger sending a byte a second holds no connection of the daemon's for longer than
    the body's time (GitHub itself gives up after 10 s): 408, and nothing handed on."""
    box = Inbox()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = make_app(
        ScriptedSource([page()]),
        token="s3cret-token-s3cret-token",
        inbox=box.inbox,
        port=port,
        body_seconds=0.5,
    )
    server = StatusServer(app, "127.0.0.1", port)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            head = "".join(f"{k}: {v}\r\n" for k, v in headers().items())
            slow.sendall(
                f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(BODY)}\r\n"
                f"{head}\r\n".encode()
            )
            slow.sendall(BODY[:1])
            answer = slow.recv(4096).decode()
    finally:
        server.stop()
    assert answer.startswith("HTTP/1.1 408")
    assert box.delivered == []
    assert box.refused == ["a webhook delivery was refused: its body took over 0.5s"]
