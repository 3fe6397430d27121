"""Both stream readers recognise a provider outage after the CLI's own retries, on streams the
pinned CLIs printed against the scripted model server (``tests/fixtures/transcripts``), and
tell it apart from any other failure."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from thirdshift.harnesses import Harness, StreamOutcome
from thirdshift.harnesses.claude import ClaudeHarness
from thirdshift.harnesses.codex import CodexHarness
from thirdshift.records import ProviderOutage

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def replay(name: str) -> StreamOutcome:
    meta = json.loads((FIXTURES / f"{name}.meta.json").read_text())
    harness: Harness = ClaudeHarness() if meta["harness"] == "claude" else CodexHarness()
    reader = harness.reader()
    for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines():
        reader.feed(line)
    return reader.finish(meta["exit_status"], meta["stopped_after_result"])


def read(harness: Harness, *events: dict[str, Any], exit_status: int = 1) -> StreamOutcome:
    reader = harness.reader()
    for event in events:
        reader.feed(json.dumps(event).encode())
    return reader.finish(exit_status, stopped_after_result=False)


def test_claude_overloaded_after_its_retries_is_a_provider_outage() -> None:
    """claude 2.1.328 after its retries of 529 (api_retry lines, then an error result with
    api_error_status 529): an outage with status 529 and the failure's cause."""
    outcome = replay("claude-2.1.328-captured-overloaded-after-retries")
    assert outcome.failed
    assert outcome.provider_outage is not None
    assert outcome.provider_outage.harness == "claude"
    assert outcome.provider_outage.status == 529
    assert outcome.provider_outage.condition == "overloaded (529)"
    assert outcome.provider_outage.cause == outcome.failure_cause
    assert "529" in (outcome.failure_cause or "")


def test_codex_503_after_its_reconnects_is_a_provider_outage() -> None:
    """codex 0.169.0 after "Reconnecting... 5/5" and a failed turn naming status 503."""
    outcome = replay("codex-0.169.0-captured-overloaded-after-retries")
    assert outcome.provider_outage == ProviderOutage(
        "codex", 503, outcome.failure_cause or "", None
    )
    assert outcome.provider_outage.condition == "unavailable (503)"


def test_codex_429_past_its_retry_limit_is_a_provider_outage() -> None:
    """codex fails a 429 without retry-after at once: "exceeded retry limit, last status: 429"."""
    outcome = replay("codex-0.169.0-captured-rate-limited")
    assert outcome.provider_outage is not None
    assert outcome.provider_outage.status == 429
    assert outcome.provider_outage.condition == "rate-limited (429)"


def test_claude_rate_limit_event_rejected_gives_the_announced_reset() -> None:
    """A ``rate_limit_event`` with status rejected, then the error result: an outage whose
    reset is the event's resetsAt."""
    resets = 1_767_229_200  # 2026-01-01T01:00:00Z
    outcome = read(
        ClaudeHarness(),
        {"type": "system", "subtype": "init", "session_id": "s-1"},
        {
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": "rejected",
                "resetsAt": resets,
                "rateLimitType": "five_hour",
            },
            "session_id": "s-1",
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "result": "Claude AI usage limit reached",
            "session_id": "s-1",
        },
    )
    assert outcome.provider_outage is not None
    assert outcome.provider_outage.status is None
    assert outcome.provider_outage.resets_at == datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    assert outcome.provider_outage.condition == "rate-limited"


def test_claude_rate_limit_event_allowed_is_not_an_outage() -> None:
    """An informational ``allowed`` event on a successful session changes nothing."""
    outcome = read(
        ClaudeHarness(),
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed_warning"}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"},
        exit_status=0,
    )
    assert not outcome.failed
    assert outcome.provider_outage is None


@pytest.mark.parametrize("status", [400, 401, 500])
def test_claude_other_api_errors_are_not_outages(status: int) -> None:
    """A bad request, a bad key or a 500 fails the session the ordinary way."""
    outcome = read(
        ClaudeHarness(),
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "api_error_status": status,
            "result": f"API Error: {status}",
        },
    )
    assert outcome.failed
    assert outcome.provider_outage is None


def test_codex_other_failed_turns_are_not_outages() -> None:
    """A failed turn naming status 400 (or none) is an ordinary failure."""
    for message in ("unexpected status 400 Bad Request: model is not supported", "boom"):
        outcome = read(
            CodexHarness(),
            {"type": "thread.started", "thread_id": "t-1"},
            {"type": "turn.failed", "error": {"message": message}},
        )
        assert outcome.failed
        assert outcome.provider_outage is None


def test_a_successful_session_is_never_an_outage() -> None:
    """The recorded tool sessions of both CLIs report no outage."""
    assert replay("claude-2.1.328-captured-tools").provider_outage is None
    assert replay("codex-0.169.0-captured-tools").provider_outage is None


REJECTED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "resetsAt": 4_102_444_800},
}


@pytest.mark.parametrize(
    "ending",
    [
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 40},
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "api_error_status": 400,
            "result": "Prompt is too long",
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "api_error_status": 401,
            "result": "Invalid API key",
        },
    ],
)
def test_a_rejected_rate_limit_earlier_does_not_make_a_later_failure_an_outage(
    ending: dict[str, Any],
) -> None:
    """Claude said one limit was rejected and went on; the session then failed on max turns,
    a too-long prompt or a bad key: that is the work's (or the set-up's) failure, not an
    outage to switch Harness or pause the daemon for."""
    outcome = read(ClaudeHarness(), REJECTED, ending)
    assert outcome.failed
    assert outcome.provider_outage is None


def test_an_allowed_event_takes_an_earlier_rejection_back() -> None:
    allowed = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}
    ending = {"type": "result", "subtype": "success", "is_error": True, "result": "API Error"}
    assert read(ClaudeHarness(), REJECTED, allowed, ending).provider_outage is None
    assert read(ClaudeHarness(), REJECTED, ending).provider_outage is not None


def test_codex_retries_it_got_past_do_not_make_a_later_death_an_outage() -> None:
    """A 503 codex reconnected past, then the process died mid-turn (or exited 1 after a
    completed turn): an ordinary failure, not an outage; the finished work is not rerun."""
    blip = {"type": "error", "message": "Reconnecting... 1/5 (unexpected status 503 Service)"}
    started = {"type": "thread.started", "thread_id": "t-1"}
    died = read(CodexHarness(), started, blip, exit_status=137)
    assert died.failed
    assert died.provider_outage is None
    completed = {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 1}}
    rate_blip = {"type": "error", "message": "unexpected status 429 Too Many Requests"}
    finished = read(CodexHarness(), started, rate_blip, completed, exit_status=1)
    assert finished.failed
    assert finished.provider_outage is None
