"""The daemon's provider pauses: a Harness whose provider is down is not picked up for until
its reset, unless a fallback Harness is available."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from thirdshift.clock import ManualClock
from thirdshift.daemon import ProviderPauses
from thirdshift.records import ProviderOutage

START = datetime(2026, 1, 1, tzinfo=UTC)


def outage(harness: str, status: int, resets_at: datetime | None = None) -> ProviderOutage:
    cause = f"{harness}'s turn failed: API error {status}"
    return ProviderOutage(harness, status, cause, resets_at)


def test_an_announced_reset_pauses_pickups_until_then() -> None:
    """A 429 resetting in ten minutes: passed over until then, with the reason; then free."""
    clock = ManualClock(START)
    pauses = ProviderPauses(clock, default_seconds=300)
    pauses.pause(outage("claude", 429, START + timedelta(minutes=10)))

    assert pauses.pass_over_reason("claude", []) == (
        "claude's provider is rate-limited (429); pickups wait until 2026-01-01 00:10:00Z "
        "(no fallback Harness)"
    )
    clock.advance(600)
    assert pauses.pass_over_reason("claude", []) is None


def test_an_outage_without_a_reset_pauses_for_the_default_time() -> None:
    """A 529 says no reset: pickups wait provider_pause_seconds."""
    clock = ManualClock(START)
    pauses = ProviderPauses(clock, default_seconds=300)
    pauses.pause(outage("claude", 529))

    clock.advance(299)
    assert pauses.pass_over_reason("claude", []) is not None
    clock.advance(1)
    assert pauses.pass_over_reason("claude", []) is None


def test_a_fallback_harness_that_is_not_paused_lets_pickups_go_on() -> None:
    """claude paused, codex fine: the Run is picked up (it switches); both paused: it waits."""
    clock = ManualClock(START)
    pauses = ProviderPauses(clock, default_seconds=300)
    pauses.pause(outage("claude", 529))
    assert pauses.pass_over_reason("claude", ["codex"]) is None

    pauses.pause(outage("codex", 503))
    reason = pauses.pass_over_reason("claude", ["codex"])
    assert reason is not None
    assert "every fallback Harness is paused too" in reason


def test_only_the_harness_whose_provider_is_down_is_paused() -> None:
    """codex's outage does not pause claude's pickups."""
    pauses = ProviderPauses(ManualClock(START), default_seconds=300)
    pauses.pause(outage("codex", 503))
    assert pauses.pass_over_reason("claude", []) is None


def test_a_reset_gone_by_or_far_off_is_held_between_the_default_and_a_day() -> None:
    """A reset already past still pauses for the default time (the provider just refused); a
    reset years away pauses for a day at most, so a bogus stamp never stops a Harness for
    good."""
    clock = ManualClock(START)
    pauses = ProviderPauses(clock, default_seconds=300)
    pauses.pause(outage("claude", 429, START - timedelta(hours=1)))
    pauses.pause(outage("codex", 429, START + timedelta(days=365 * 200)))

    claude = pauses.paused("claude")
    codex = pauses.paused("codex")
    assert claude is not None
    assert codex is not None
    assert (claude[0], codex[0]) == (START + timedelta(seconds=300), START + timedelta(days=1))


def test_with_every_harness_paused_pickups_wait_for_the_first_back() -> None:
    clock = ManualClock(START)
    pauses = ProviderPauses(clock, default_seconds=300)
    pauses.pause(outage("claude", 429, START + timedelta(hours=5)))
    pauses.pause(outage("codex", 503))

    reason = pauses.pass_over_reason("claude", ["codex"])
    assert reason is not None
    assert "pickups wait until 2026-01-01 00:05:00Z" in reason
