"""The GitHub adapter's webhook reads (``webhooks``, ``webhook_deliveries``) against the real
GitHub stand-in, and the doctor's webhook line made through its real Outside on top of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.contract.test_github_adapter import adapter
from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, Sandbox
from thirdshift.doctor.check import Check
from thirdshift.doctor.outside import SystemOutside
from thirdshift.doctor.webhooks import WEBHOOK_EVENTS, check_webhooks
from thirdshift.errors import GitHubError, NotFound
from thirdshift.github import GitHub
from thirdshift.records import HookDelivery, Webhook
from thirdshift.settings import Settings

SECRET = "a-long-random-webhook-secret"
SINCE = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_webhooks_are_read_as_records_with_where_they_send_and_how(sandbox: Sandbox) -> None:
    made = sandbox.stand_in.world.add_hook(
        OWNER, NAME, "https://hooks.example.com/webhook", events=("*",), secret=SECRET
    )
    sandbox.stand_in.world.add_hook(OWNER, NAME, "http://ci.example.com/x", content_type="form")
    github, _ = adapter(sandbox, "ada")
    assert github.webhooks(OWNER, NAME) == (
        Webhook(made.id, "https://hooks.example.com/webhook", True, ("*",), "json", True),
        Webhook(made.id + 1, "http://ci.example.com/x", True, ("push",), "form", False),
    )


def test_an_organisation_s_webhooks_are_read_without_a_repository_name(sandbox: Sandbox) -> None:
    sandbox.stand_in.world.add_organisation_owner(OWNER, "ada")
    made = sandbox.stand_in.world.add_hook(OWNER, None, "https://hooks.example.com/webhook")
    github, _ = adapter(sandbox, "ada")
    assert [hook.id for hook in github.webhooks(OWNER)] == [made.id]
    sandbox.stand_in.world.record_delivery(made, 200, event="ping", action=None)
    [ping] = github.webhook_deliveries(OWNER, None, made.id)
    assert (ping.what, ping.succeeded) == ("ping", True)


def test_the_newest_deliveries_are_read_newest_first_up_to_the_limit(sandbox: Sandbox) -> None:
    """Twelve recorded, ten asked for: the ten newest, each with its event, action, answer and
    time, from one page."""
    hook = sandbox.stand_in.world.add_hook(OWNER, NAME, "https://hooks.example.com/webhook")
    for minute in range(12):
        code = 502 if minute == 11 else 200
        at = SINCE + timedelta(minutes=minute)
        sandbox.stand_in.world.record_delivery(hook, code, delivered_at=at)
    github, _ = adapter(sandbox, "ada", per_page=5)
    before = github.request_counts().sent
    recent = github.webhook_deliveries(OWNER, NAME, hook.id, limit=10)
    assert [d.delivered_at.minute for d in recent] == list(range(11, 1, -1))
    newest = recent[0]
    assert isinstance(newest, HookDelivery)
    assert (newest.what, newest.status_code, newest.status, newest.succeeded) == (
        "issues.labeled",
        502,
        "Invalid HTTP Response: 502",
        False,
    )
    assert newest.delivered_at == SINCE + timedelta(minutes=11)
    assert github.request_counts().sent - before == 2  # two pages of five, not the third


def test_hooks_someone_without_admin_asks_for_are_not_found(sandbox: Sandbox) -> None:
    github, _ = adapter(sandbox, "wes")
    with pytest.raises(NotFound):
        github.webhooks(OWNER, NAME)
    with pytest.raises(NotFound):
        github.webhooks(OWNER)


def test_an_installation_token_without_the_webhooks_permission_is_refused_with_403(
    sandbox: Sandbox,
) -> None:
    sandbox.client.add_user("factory-app[bot]", "ghs_installation_0123456789", {FULL_NAME: "admin"})
    github, _ = adapter(sandbox, token="ghs_installation_0123456789")
    with pytest.raises(GitHubError) as caught:
        github.webhooks(OWNER, NAME)
    assert caught.value.status == 403
    assert caught.value.detail == "Resource not accessible by integration"


def _doctor(sandbox: Sandbox, tmp_path: Path, login: str) -> Check:
    """The webhook line of acme/widgets as ``thirdshift doctor`` makes it, through its real
    Outside and the adapter acting as ``login``."""
    github: GitHub = adapter(sandbox, login)[0]
    outside = SystemOutside({}, github_for=lambda _s, _r: github, hidden=lambda _s: ())
    settings = Settings(home=tmp_path, repositories=[FULL_NAME], webhook_secret=SecretStr(SECRET))
    passed = [Check("github", "PASS", ""), Check(f"repository {FULL_NAME}", "PASS", "")]
    [line] = check_webhooks(outside, settings, [FULL_NAME], passed)
    return line


def test_the_doctor_passes_a_sound_hook_read_from_github(sandbox: Sandbox, tmp_path: Path) -> None:
    hook = sandbox.stand_in.world.add_hook(
        OWNER, NAME, "https://hooks.example.com/webhook", events=WEBHOOK_EVENTS, secret=SECRET
    )
    sandbox.stand_in.world.record_delivery(hook, 200, event="ping", action=None)
    line = _doctor(sandbox, tmp_path, "ada")
    assert line.status == "PASS"
    assert line.detail.startswith(f"hook {hook.id} (the repository's) to https://hooks.example")


def test_the_doctor_warns_of_a_failed_delivery_read_from_github(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    hook = sandbox.stand_in.world.add_hook(
        OWNER, NAME, "https://hooks.example.com/webhook", events=("*",), secret=SECRET
    )
    sandbox.stand_in.world.record_delivery(hook, 502, delivered_at=SINCE)
    line = _doctor(sandbox, tmp_path, "ada")
    assert line.status == "WARN"
    assert line.detail.endswith(
        "its last delivery (issues.labeled) failed with status 502 at 2026-03-02 12:00 UTC"
    )


def test_the_doctor_skips_hooks_a_writer_may_not_read(sandbox: Sandbox, tmp_path: Path) -> None:
    line = _doctor(sandbox, tmp_path, "wes")
    assert line.status == "SKIP"
    assert "needs admin on the repository" in line.detail
