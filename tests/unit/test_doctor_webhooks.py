"""The webhook lines of `thirdshift doctor`, through the scripted Outside: with webhook_secret
set, each repository's (and each owner's) hook is judged by where it sends, how, which events,
and whether its newest deliveries succeeded; what is wrong is a warning with its fix, a hook the
credentials may not read a skip, and nothing about a webhook is ever a failure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.unit.test_doctor import ScriptedOutside, by_name
from thirdshift.doctor.checks import diagnose, failed
from thirdshift.doctor.webhooks import RECENT_DELIVERIES, WEBHOOK_EVENTS
from thirdshift.errors import ConfigError, GitHubError, NotFound, ThirdshiftError
from thirdshift.records import HookDelivery, Webhook
from thirdshift.web.webhook import WAKING_ACTIONS

SECRET = "a-long-random-webhook-secret"
NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOOK = Webhook(
    id=7,
    url="https://hooks.example.com/webhook",
    active=True,
    events=WEBHOOK_EVENTS,
    content_type="json",
    has_secret=True,
)


def delivered(status_code: int, minutes_ago: int = 0, **values: Any) -> HookDelivery:
    return HookDelivery(
        id=1000 - minutes_ago,
        guid=f"guid-{minutes_ago}",
        event=values.pop("event", "issues"),
        action=values.pop("action", "labeled"),
        status_code=status_code,
        status=values.pop("status", "OK" if 200 <= status_code < 300 else "Invalid HTTP Response"),
        delivered_at=NOON - timedelta(minutes=minutes_ago),
        **values,
    )


def hooked(
    hooks: dict[str, tuple[Webhook, ...]] | None = None,
    deliveries: dict[int, tuple[HookDelivery, ...]] | None = None,
    **values: Any,
) -> ScriptedOutside:
    """acme/widgets with webhook_secret set and, unless told otherwise, one sound hook whose
    last deliveries all succeeded."""
    return ScriptedOutside(
        settings_values={"repositories": ["acme/widgets"], "webhook_secret": SECRET, **values},
        hooks={"acme/widgets": (HOOK,)} if hooks is None else hooks,
        deliveries={7: (delivered(200), delivered(202, 5))} if deliveries is None else deliveries,
    )


def test_without_webhook_secret_there_is_no_webhook_line_and_no_hook_is_read() -> None:
    outside = hooked(webhook_secret=None)
    checks = diagnose(outside)
    assert not [check for check in checks if check.name.startswith("webhook")]
    assert not [call for call in outside.calls if call[0].startswith("webhook")]


def test_a_sound_hook_whose_recent_deliveries_succeeded_passes_after_the_repository() -> None:
    """The line comes after the repository's labels and names the hook, where it sends and
    when its newest delivery went; its last deliveries are asked for, RECENT_DELIVERIES."""
    checks = diagnose(hooked())
    names = [check.name for check in checks]
    assert names.index("webhook acme/widgets") == names.index("labels of acme/widgets") + 1
    line = by_name(checks)["webhook acme/widgets"]
    assert line.status == "PASS"
    assert line.detail == (
        "hook 7 (the repository's) to https://hooks.example.com/webhook sends the events the "
        "daemon needs, signed; its last 2 deliveries succeeded, the newest at 2026-03-02 12:00 UTC"
    )
    assert RECENT_DELIVERIES == 10


def test_a_hook_subscribed_to_every_event_counts() -> None:
    outside = hooked(hooks={"acme/widgets": (replace(HOOK, events=("*",)),)})
    assert by_name(diagnose(outside))["webhook acme/widgets"].status == "PASS"


def test_no_hook_sending_to_the_webhook_path_warns_with_how_to_add_one() -> None:
    """A hook of another service (its path is not /webhook) does not count; the warning says
    where to add one and with what, and fails nothing."""
    other = replace(HOOK, id=8, url="https://ci.example.com/github-events")
    outside = hooked(hooks={"acme/widgets": (other,), "acme": ()})
    checks = diagnose(outside)
    line = by_name(checks)["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail == (
        "no hook of acme/widgets (nor of the organisation acme) sends deliveries to a URL "
        "ending in /webhook: the daemon sees changes at its polls only"
    )
    assert line.fix.startswith("add one in the repository's Settings, Webhooks")
    assert "content type application/json, the secret webhook_secret" in line.fix
    assert not failed(checks)


@pytest.mark.parametrize(
    ("changed", "problem", "fix"),
    [
        ({"active": False}, "it is not active", "tick Active"),
        (
            {"content_type": "form"},
            "its content type is form, and the daemon reads JSON only",
            "set its Content type to application/json",
        ),
        (
            {"has_secret": False},
            "it has no secret, so the daemon refuses its deliveries (401)",
            "set its Secret to webhook_secret",
        ),
        (
            {"events": ("issues", "push")},
            "it does not send issue_comment, pull_request_review, pull_request_review_comment, "
            "check_run, check_suite, sub_issues",
            "tick the events docs/daemon.md names (Webhooks)",
        ),
    ],
)
def test_a_hook_set_up_wrong_warns_naming_what_and_how_to_fix_it(
    changed: dict[str, Any], problem: str, fix: str
) -> None:
    outside = hooked(hooks={"acme/widgets": (replace(HOOK, **changed),)})
    checks = diagnose(outside)
    line = by_name(checks)["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail == (
        f"hook 7 (the repository's) to https://hooks.example.com/webhook: {problem}"
    )
    assert fix in line.fix
    assert not failed(checks)


def test_several_faults_of_one_hook_are_named_together() -> None:
    broken = replace(HOOK, active=False, has_secret=False)
    line = by_name(diagnose(hooked(hooks={"acme/widgets": (broken,)})))["webhook acme/widgets"]
    assert line.detail.endswith(
        "it is not active; it has no secret, so the daemon refuses its deliveries (401)"
    )
    assert (
        line.fix == "tick Active in the hook's settings on GitHub; set its Secret to webhook_secret"
    )


def test_a_last_delivery_that_failed_warns_with_its_status_time_and_how_to_redeliver() -> None:
    outside = hooked(deliveries={7: (delivered(502), delivered(200, 5))})
    line = by_name(diagnose(outside))["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail.endswith(
        "its last delivery (issues.labeled) failed with status 502 at 2026-03-02 12:00 UTC"
    )
    assert line.fix == (
        "check the daemon's --http address and the proxy in front of it (docs/daemon.md, "
        "Webhooks), then press Redeliver on the failed ones in the hook's Recent Deliveries on "
        "GitHub"
    )


def test_a_delivery_github_could_not_make_says_there_was_no_answer() -> None:
    lost = delivered(0, status="failed to connect to host", event="ping", action=None)
    line = by_name(diagnose(hooked(deliveries={7: (lost,)})))["webhook acme/widgets"]
    assert line.detail.endswith(
        "its last delivery (ping) failed with no answer (failed to connect to host) at "
        "2026-03-02 12:00 UTC"
    )


def test_an_earlier_failure_among_the_recent_deliveries_still_warns_saying_the_newest_passed() -> (
    None
):
    recent = (delivered(200), delivered(503, 5), delivered(401, 9), delivered(200, 20))
    line = by_name(diagnose(hooked(deliveries={7: recent})))["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail.endswith(
        "2 of its last 4 deliveries failed, the latest (issues.labeled) failed with status 503 "
        "at 2026-03-02 11:55 UTC, though the newest, at 2026-03-02 12:00 UTC, succeeded"
    )


def test_a_hook_github_recorded_no_delivery_of_passes_saying_so() -> None:
    line = by_name(diagnose(hooked(deliveries={})))["webhook acme/widgets"]
    assert line.status == "PASS"
    assert line.detail.endswith("GitHub recorded no delivery of it in the last 30 days")


@pytest.mark.parametrize(
    "refusal",
    [
        NotFound("GitHub has no the webhooks of acme/widgets", 404),
        GitHubError("GitHub refused GET ... (403: Resource not accessible by integration)", 403),
    ],
)
def test_hooks_the_credentials_may_not_read_are_skipped_saying_what_reading_them_needs(
    refusal: GitHubError,
) -> None:
    outside = hooked(hooks={})
    outside.hook_errors["acme/widgets"] = refusal
    checks = diagnose(outside)
    line = by_name(checks)["webhook acme/widgets"]
    assert line.status == "SKIP"
    assert line.detail == (
        "skipped: the credentials may not read the hooks of acme/widgets: that needs admin on "
        "the repository, or the GitHub App's Webhooks read permission"
    )
    assert not failed(checks)


def test_another_error_reading_the_hooks_warns_that_it_cannot_tell() -> None:
    outside = hooked(hooks={})
    outside.hook_errors["acme/widgets"] = GitHubError(
        "GitHub answered 500 to GET /repos/acme/widgets/hooks; try again later", 500
    )
    line = by_name(diagnose(outside))["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail == "cannot tell: GitHub answered 500 to GET /repos/acme/widgets/hooks"
    assert line.fix == "try again later"


def test_deliveries_that_cannot_be_read_leave_a_sound_hook_passing_and_say_so() -> None:
    class Refusing(ScriptedOutside):
        def webhook_deliveries(self, *args: Any, **kwargs: Any) -> tuple[HookDelivery, ...]:
            raise GitHubError("GitHub refused GET deliveries (403); give the token access", 403)

    outside = Refusing(
        settings_values={"repositories": ["acme/widgets"], "webhook_secret": SECRET},
        hooks={"acme/widgets": (HOOK,)},
    )
    line = by_name(diagnose(outside))["webhook acme/widgets"]
    assert line.status == "PASS"
    assert line.detail.endswith(
        "its deliveries cannot be read: GitHub refused GET deliveries (403)"
    )


def test_an_organisation_hook_serves_a_repository_without_one_of_its_own() -> None:
    """The organisation's hooks are read once for all of its repositories."""
    outside = hooked(hooks={"acme/widgets": (), "acme/gadgets": (), "acme": (HOOK,)})
    outside.roles["acme/gadgets"] = "write"
    outside.labels["acme/gadgets"] = {"ready-for-agent", "in-progress"}
    checks = by_name(diagnose(outside, ["acme/gadgets"]))
    for name in ("webhook acme/widgets", "webhook acme/gadgets"):
        assert checks[name].status == "PASS"
        assert checks[name].detail.startswith("hook 7 (the organisation acme's) to https://")
    assert outside.calls.count(("webhooks", "acme")) == 1


def test_a_repository_without_a_hook_whose_owner_s_hooks_cannot_be_read_warns_saying_so() -> None:
    outside = hooked(hooks={"acme/widgets": ()})
    outside.hook_errors["acme"] = NotFound("no such organisation", 404)
    line = by_name(diagnose(outside))["webhook acme/widgets"]
    assert line.status == "WARN"
    assert line.detail.startswith(
        "no hook of acme/widgets (and no organisation hook of acme could be read) sends"
    )


def test_each_owner_watched_gets_a_line_for_its_organisation_s_hook() -> None:
    """A sound organisation hook passes; a user's account, which GitHub answers 404 for,
    is skipped saying why; an organisation without one warns."""
    outside = hooked(
        hooks={"acme/widgets": (HOOK,), "acme": (HOOK,), "bigco": ()},
        owners=["acme", "ada", "bigco"],
    )
    outside.hook_errors["ada"] = NotFound("no such organisation", 404)
    checks = by_name(diagnose(outside))
    assert checks["webhook acme"].status == "PASS"
    assert checks["webhook ada"].detail == (
        "skipped: the credentials may not read the hooks of the organisation ada: that needs an "
        "owner of the organisation (with a classic token, its admin:org_hook scope), and a "
        "user's account has no such hooks"
    )
    assert checks["webhook bigco"].status == "WARN"
    assert checks["webhook bigco"].fix.startswith("add one in the organisation's Settings")


def test_webhook_lines_are_skipped_when_github_or_the_repository_cannot_be_checked() -> None:
    outside = hooked(owners=["acme"])
    outside.raises["github_login"] = ConfigError("no GitHub token; set GITHUB_TOKEN")
    checks = by_name(diagnose(outside))
    for name in ("webhook acme/widgets", "webhook acme"):
        assert checks[name].detail == "skipped: the GitHub credentials do not work"
    unseen = hooked()
    unseen.roles.clear()
    line = by_name(diagnose(unseen))["webhook acme/widgets"]
    assert line.detail == "skipped: the repository check of acme/widgets did not pass"
    assert ("webhooks", "acme/widgets") not in unseen.calls


def test_with_a_github_app_no_hook_is_a_skip_and_organisation_hooks_are_not_read() -> None:
    """An App's deliveries usually come from its own webhook, which its installation cannot
    read: no hook on the repository is no warning then."""
    outside = hooked(hooks={"acme/widgets": ()}, github_app_id=42, owners=["acme"])
    checks = by_name(diagnose(outside))
    line = checks["webhook acme/widgets"]
    assert line.status == "SKIP"
    assert "a GitHub App's own webhook (the App's settings)" in line.detail
    assert checks["webhook acme"].detail == "skipped: owners are watched with a token only"
    assert ("webhooks", "acme") not in outside.calls


def test_a_hook_url_is_shown_without_its_user_password_or_query() -> None:
    secretive = replace(HOOK, url="https://user:pw@hooks.example.com:8443/webhook?key=abc")
    line = by_name(diagnose(hooked(hooks={"acme/widgets": (secretive,)})))["webhook acme/widgets"]
    assert "to https://hooks.example.com:8443/webhook sends" in line.detail
    assert "user:pw" not in line.detail
    assert "key=abc" not in line.detail


def test_the_events_a_hook_must_send_are_those_that_wake_a_poll() -> None:
    """The doctor's list and the daemon's (thirdshift/web/webhook.py) name the same events;
    ping comes whatever a hook is subscribed to."""
    assert set(WEBHOOK_EVENTS) == set(WAKING_ACTIONS) - {"ping"}


def test_no_webhook_line_is_ever_a_failure() -> None:
    """Every outcome above, at once: warnings and skips, never a FAIL."""
    outside = hooked(
        hooks={"acme/widgets": (replace(HOOK, active=False),)},
        deliveries={7: (delivered(500),)},
        owners=["acme", "ada"],
    )
    errors: dict[str, ThirdshiftError] = {"ada": NotFound("no", 404)}
    outside.hook_errors.update(errors)
    checks = [c for c in diagnose(outside) if c.name.startswith("webhook")]
    assert {c.status for c in checks} == {"WARN", "SKIP"}
    assert not failed(checks)
