"""Notification rules and the Notifier: the JSON body, its signature as a receiver checks it,
the text for chat, scrubbing, and failed sends as warnings that never stop the others."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from thirdshift.daemon.ready import pass_over_notification
from thirdshift.errors import ConfigError
from thirdshift.notify import (
    ScriptedTarget,
    TargetNotifier,
    WebhookTarget,
    body_of,
    signature,
    text_of,
)
from thirdshift.records import Notification
from thirdshift.run_states import RunKind
from thirdshift.runs.ports import NO_NOTIFIER
from thirdshift.runs.ports import Notifier as NotifierPort
from thirdshift.scrub import Scrubber

SECRET = "ghp_" + "Notified" * 5

ENDED = Notification(
    event="run.ended",
    repository="acme/widgets",
    issue_number=3,
    issue_url="https://github.test/acme/widgets/issues/3",
    state="failed",
    run_id=12,
    kind=RunKind.DELIVERY,
    cause=f"the agent printed {SECRET}",
    pull_request_url="https://github.test/acme/widgets/pull/4",
    cost_usd=0.25,
    post_mortem=f"Last lines of implement:\n  $ echo {SECRET}",
)


def test_the_body_is_json_with_every_field() -> None:
    assert json.loads(body_of(ENDED)) == {
        "type": "notification",
        "version": 1,
        "event": "run.ended",
        "run_id": 12,
        "repository": "acme/widgets",
        "issue_number": 3,
        "issue_url": "https://github.test/acme/widgets/issues/3",
        "kind": "run",
        "state": "failed",
        "cause": f"the agent printed {SECRET}",
        "pull_request_url": "https://github.test/acme/widgets/pull/4",
        "cost_usd": 0.25,
        "post_mortem": f"Last lines of implement:\n  $ echo {SECRET}",
        "tickets": [],
    }


def test_the_signature_is_github_style_hmac_sha256_of_the_exact_body() -> None:
    """A receiver recomputes it from the raw body and the shared secret."""
    body = body_of(ENDED)
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature(body, "s3cret") == expected
    assert signature(body, "other") != expected
    assert signature(body + b" ", "s3cret") != expected


def test_chat_text_says_what_happened_to_which_issue() -> None:
    title, text = text_of(ENDED)
    assert title == "thirdshift: acme/widgets#3 failed"
    assert text.splitlines()[:2] == ["Run 12 (run): failed", f"Cause: the agent printed {SECRET}"]
    assert "Pull request: https://github.test/acme/widgets/pull/4" in text
    assert "Cost: $0.2500" in text


def test_a_pass_over_message_names_the_issue_and_the_reason() -> None:
    notice = pass_over_notification(
        "acme/widgets", 5, "https://github.test/acme/widgets/issues/5", "mallory added it"
    )
    assert (notice.event, notice.state, notice.cause, notice.run_id) == (
        "issue.passed_over",
        "passed-over",
        "mallory added it",
        None,
    )
    assert text_of(notice)[0] == "thirdshift passed over acme/widgets#5"


def test_every_target_gets_the_scrubbed_message() -> None:
    lines: list[str] = []
    first, second = ScriptedTarget("one"), ScriptedTarget("two")
    TargetNotifier([first, second], scrub=Scrubber([SECRET]), progress=lines.append).notify(ENDED)
    for target in (first, second):
        [(sent, body)] = target.sent
        assert SECRET not in body.decode()
        assert sent.cause == "the agent printed [REDACTED]"
        assert body == body_of(sent)
    assert lines == ["notified one of Run 12 (failed)", "notified two of Run 12 (failed)"]


def test_a_failed_send_is_a_warning_and_the_next_target_still_gets_it() -> None:
    lines: list[str] = []
    broken, fine = ScriptedTarget("webhook https://hooks.test"), ScriptedTarget("slack (1)")
    broken.fail_next([f"answered 500 ({SECRET})"])
    TargetNotifier([broken, fine], scrub=Scrubber([SECRET]), progress=lines.append).notify(ENDED)
    assert lines[0] == (
        "warning: could not notify webhook https://hooks.test of Run 12: answered 500 ([REDACTED])"
    )
    assert len(fine.sent) == 1


def test_no_target_means_not_configured() -> None:
    assert not TargetNotifier([], scrub=Scrubber(), progress=print).configured
    assert not NO_NOTIFIER.configured


def test_a_webhook_needs_its_secret_and_an_http_url() -> None:
    with pytest.raises(ConfigError, match="without notify_webhook_secret"):
        WebhookTarget("https://hooks.test/x", "")
    with pytest.raises(ConfigError, match="http:// or https://"):
        WebhookTarget("file:///etc/passwd", "s3cret")


def test_a_webhook_is_named_without_its_path_or_credentials() -> None:
    target = WebhookTarget("https://user:pw@hooks.test:8443/T0KEN/path?k=v", "s3cret")
    assert target.name == "webhook https://hooks.test:8443"


def _conforms(notifier: TargetNotifier) -> NotifierPort:
    """mypy holds the real Notifier to the seam a Run takes."""
    return notifier


def test_the_scrubber_learns_every_notification_secret(tmp_path: Path) -> None:
    """The webhook's secret and URL, and each Apprise URL with its credential parts, but not
    plain host names."""
    from pydantic import SecretStr

    from thirdshift.bootstrap import notification_secrets
    from thirdshift.settings import Settings

    settings = Settings(
        home=tmp_path,
        notify_webhook_url="https://hooks.test/T0KENPATH123",
        notify_webhook_secret=SecretStr("whsec-0123456789"),
        notify_urls=[
            "mailto://someone:Pa55word-long@gmail.com",
            "slack://TA1B2C3D4/BE5F6G7H8/xYz0123456789abc",
        ],
    )
    found = notification_secrets(settings)
    scrub = Scrubber(found)
    assert "whsec-0123456789" in found
    assert "https://hooks.test/T0KENPATH123" in found
    assert "Pa55word-long" in found
    assert "xYz0123456789abc" in found
    assert "gmail.com" not in found
    assert scrub("sent to slack://TA1B2C3D4/BE5F6G7H8/xYz0123456789abc") == "sent to [REDACTED]"
    assert scrub("mail for gmail.com, pass Pa55word-long") == "mail for gmail.com, pass [REDACTED]"


class _Crashing:
    name = "webhook https://odd.test"

    def send(self, notification: Notification, body: bytes) -> None:
        raise ValueError("a malformed status line")


class _Stalling:
    name = "webhook https://slow.test"

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()

    def send(self, notification: Notification, body: bytes) -> None:
        self.release.wait(30)


def test_a_target_that_breaks_in_any_way_is_a_warning_and_the_others_still_get_it() -> None:
    lines: list[str] = []
    fine = ScriptedTarget("slack (1)")
    TargetNotifier([_Crashing(), fine], scrub=Scrubber(), progress=lines.append).notify(ENDED)
    assert lines[0] == (
        "warning: could not notify webhook https://odd.test of Run 12: failed (ValueError)"
    )
    assert len(fine.sent) == 1


def test_a_target_that_does_not_answer_is_left_behind_at_the_deadline() -> None:
    """urllib bounds each read, not the whole answer: a receiver trickling bytes must not hold
    a Run (and its Lease) or the daemon's poll."""
    lines: list[str] = []
    stalling = _Stalling()
    notifier = TargetNotifier(
        [stalling], scrub=Scrubber(), progress=lines.append, deadline_seconds=0.3
    )
    try:
        notifier.notify(ENDED)
    finally:
        stalling.release.set()
    assert lines == [
        "warning: could not notify webhook https://slow.test of Run 12: no answer within 0.3s; "
        "left behind"
    ]


def test_a_webhook_port_out_of_range_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="a port from 1 to 65535"):
        WebhookTarget("http://hooks.test:99999/x", "s3cret")


def test_chat_wide_mentions_in_agent_text_are_broken() -> None:
    from thirdshift.notify.targets import _no_mentions

    text = _no_mentions("ping @everyone and @here, <!channel> too; mail me@example.com")
    assert "@everyone" not in text
    assert "@here" not in text
    assert "<!channel>" not in text
    assert "me@example.com" in text


def test_an_architect_run_s_message_names_its_repository_not_an_issue_0() -> None:
    from thirdshift.notify.message import text_of
    from thirdshift.records import Notification

    title, body = text_of(
        Notification(
            event="run.ended",
            repository="acme/widgets",
            issue_number=None,
            issue_url="https://github.test/acme/widgets/issues/31",
            state="published",
            run_id=14,
            kind=RunKind.ARCHITECT,
        )
    )
    assert title == "thirdshift: Architect run on acme/widgets published"
    assert "#0" not in title
    assert "Run 14 (architect): published" in body
