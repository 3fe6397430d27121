"""The real notification targets against a real HTTP receiver on 127.0.0.1: the webhook's
signed POST, its failures (an error status, a redirect, nobody listening) as
``NotificationFailed`` without the URL's path, and an Apprise URL (``json://``) delivered."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket

import pytest

from tests.support.webhook_receiver import WebhookReceiver
from thirdshift.errors import ConfigError, NotificationFailed
from thirdshift.notify import AppriseTarget, WebhookTarget, body_of
from thirdshift.records import Notification
from thirdshift.run_states import RunKind

NOTICE = Notification(
    event="run.ended",
    repository="acme/widgets",
    issue_number=3,
    issue_url="https://github.test/acme/widgets/issues/3",
    state="ready",
    run_id=12,
    kind=RunKind.DELIVERY,
    pull_request_url="https://github.test/acme/widgets/pull/4",
)
SECRET = "contract-shared-secret"


def test_the_webhook_posts_the_body_signed_with_the_shared_secret() -> None:
    with WebhookReceiver() as receiver:
        WebhookTarget(receiver.url, SECRET).send(NOTICE, body_of(NOTICE))
    [delivery] = receiver.received
    assert delivery.path == "/hooks/thirdshift"
    assert delivery.body == body_of(NOTICE)
    expected = "sha256=" + hmac.new(SECRET.encode(), delivery.body, hashlib.sha256).hexdigest()
    assert delivery.headers["x-thirdshift-signature-256"] == expected
    assert delivery.headers["x-thirdshift-event"] == "run.ended"
    assert delivery.headers["content-type"] == "application/json"


@pytest.mark.parametrize("status", [500, 404, 302])
def test_a_webhook_answering_anything_but_2xx_failed(status: int) -> None:
    with WebhookReceiver(status=status) as receiver:
        target = WebhookTarget(receiver.url, SECRET)
        with pytest.raises(NotificationFailed, match=f"answered {status}") as caught:
            target.send(NOTICE, body_of(NOTICE))
    assert "/hooks/" not in str(caught.value)
    assert len(receiver.received) == 1  # a redirect is not followed


def test_a_webhook_nobody_listens_on_failed() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    target = WebhookTarget(f"http://127.0.0.1:{port}/x", SECRET, timeout=2)
    with pytest.raises(NotificationFailed, match="could not be reached"):
        target.send(NOTICE, body_of(NOTICE))


def test_an_apprise_url_delivers_the_message_as_text() -> None:
    """Apprise's own ``json://`` service, pointed at the receiver: the title and text arrive."""
    with WebhookReceiver(status=200) as receiver:
        url = receiver.url.replace("http://", "json://", 1)
        AppriseTarget(url, 1).send(NOTICE, body_of(NOTICE))
    [delivery] = receiver.received
    sent = json.loads(delivery.body)
    assert sent["title"] == "thirdshift: acme/widgets#3 ready"
    assert "Pull request: https://github.test/acme/widgets/pull/4" in sent["message"]


def test_an_apprise_url_that_is_refused_failed_without_printing_the_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with WebhookReceiver(status=500) as receiver:
        url = receiver.url.replace("http://", "json://", 1)
        target = AppriseTarget(url, 2)
        assert target.name == "json (notify_urls entry 2)"
        with pytest.raises(NotificationFailed, match="not sent"):
            target.send(NOTICE, body_of(NOTICE))
    captured = capsys.readouterr()
    assert "/hooks/" not in captured.err + captured.out


def test_an_apprise_url_apprise_does_not_know_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="notify_urls entry 1 \\(bogus://\\)"):
        AppriseTarget("bogus://whatever", 1)
