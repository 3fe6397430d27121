"""The rules of a pickup: which issue is Ready, and the reason given for each one passed over."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from thirdshift.daemon.ready import (
    ReadyRules,
    blocker_reason,
    first_look,
    labeller_reason,
    lowest_first,
)
from thirdshift.records import BlockingIssue, IssueSummary

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
SETTLED = timedelta(minutes=5)
RULES = ReadyRules.of(
    ready_label="ready-for-agent",
    in_progress_label="in-progress",
    excluded_labels=["needs-triage", "needs-info", "ready-for-human", "wontfix"],
    settle_seconds=60,
)
ISSUE = IssueSummary(
    number=7,
    title="Add the widget",
    state="open",
    labels=("ready-for-agent", "enhancement"),
    is_pull_request=False,
    updated_at=NOW - timedelta(minutes=5),
    html_url="https://github.test/acme/widgets/issues/7",
)


def test_an_open_settled_issue_with_the_ready_label_passes_the_first_look() -> None:
    assert first_look(ISSUE, RULES, SETTLED) is None


def test_labels_match_without_regard_to_case() -> None:
    assert first_look(replace(ISSUE, labels=("Ready-For-Agent",)), RULES, SETTLED) is None
    reason = first_look(replace(ISSUE, labels=("Ready-For-Agent", "WontFix")), RULES, SETTLED)
    assert reason is not None
    assert "wontfix" in reason


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"is_pull_request": True}, "is a pull request"),
        ({"state": "closed"}, "is closed"),
        ({"labels": ("enhancement",)}, "no longer carries ready-for-agent"),
        ({"labels": ("ready-for-agent", "needs-info")}, "carries needs-info; remove that label"),
    ],
)
def test_each_first_look_rule_names_its_reason(change: dict[str, object], expected: str) -> None:
    reason = first_look(replace(ISSUE, **change), RULES, SETTLED)  # type: ignore[arg-type]
    assert reason is not None
    assert expected in reason


def test_an_issue_seen_unchanged_for_less_than_the_settle_time_waits() -> None:
    reason = first_look(ISSUE, RULES, timedelta(seconds=45))
    assert reason == "it changed recently; it is taken once unchanged for 60s"


def test_an_issue_unchanged_for_exactly_the_settle_time_is_taken() -> None:
    assert first_look(ISSUE, RULES, timedelta(seconds=60)) is None


def test_an_issue_a_person_handed_back_after_a_failed_run_is_ready_despite_in_progress() -> None:
    both = replace(ISSUE, labels=("ready-for-agent", "in-progress"))
    assert first_look(both, RULES, SETTLED) is None


@pytest.mark.parametrize("role", ["admin", "maintain", "write", "triage"])
def test_people_who_may_triage_or_write_may_label(role: str) -> None:
    assert labeller_reason("maintainer", role, RULES) is None


@pytest.mark.parametrize("role", ["read", "none", None])
def test_a_label_from_a_reader_is_passed_over_naming_who_added_it(role: str | None) -> None:
    reason = labeller_reason("drive-by", role, RULES)
    assert reason is not None
    assert reason.startswith("drive-by added ready-for-agent with ")
    assert "triage or write permission" in reason


def test_a_label_nobody_is_shown_adding_is_passed_over() -> None:
    reason = labeller_reason(None, None, RULES)
    assert reason is not None
    assert "no one adding ready-for-agent" in reason


def test_an_issue_with_open_blockers_waits_naming_them() -> None:
    assert blocker_reason(()) is None
    assert blocker_reason((BlockingIssue(4, "closed"),)) is None
    listed = (
        BlockingIssue(12, "open"),
        BlockingIssue(2, "open", elsewhere="acme/gadgets"),
        BlockingIssue(3, "open"),
        BlockingIssue(5, "closed"),
    )
    assert (
        blocker_reason(listed)
        == "it is blocked by #3, #12, acme/gadgets#2, still open; it is taken once they close"
    )


def test_ready_issues_are_taken_lowest_number_first() -> None:
    issues = [replace(ISSUE, number=n) for n in (9, 2, 5)]
    assert [issue.number for issue in lowest_first(issues)] == [2, 5, 9]
