"""The rules of an Architect run: its gates, the result file it must leave, and the issues
thirdshift renders from it."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from thirdshift.defang import defanged
from thirdshift.records import IssueSummary
from thirdshift.runs.rules.gates import architect_gate, waiting_for_triage
from thirdshift.runs.rules.plans import (
    Covered,
    Idea,
    Plan,
    ResultInvalid,
    parse_result,
    result_digest,
    result_from_json,
    result_to_json,
)
from thirdshift.runs.rules.prompts import architect_prompt
from thirdshift.runs.rules.published_issues import (
    Marker,
    PlanPart,
    Reviewed,
    issue_text,
    kept_mismatch,
    marked_part,
    marker,
    plan_marker,
    plan_parts,
    published_line,
)
from thirdshift.settings import cron_trigger

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
DIGEST = "d1" * 32


def ticket(title: str = "Fold the two parsers", **extra: Any) -> dict[str, Any]:
    return {
        "title": title,
        "why": "Two parsers drift apart.",
        "what_to_build": "One parser both callers use.",
        "acceptance": ["both callers use it", "the old ones are gone"],
        "decisions": ["keep the strict one"],
        **extra,
    }


def two_ticket_plan() -> dict[str, Any]:
    return {
        "outcome": "plan",
        "spec": {"title": "One parser", "why": "w", "what_to_build": "b", "decisions": []},
        "tickets": [ticket("First"), ticket("Second", blocked_by=[1])],
    }


def issue(number: int, *labels: str, state: str = "open") -> IssueSummary:
    return IssueSummary(
        number=number,
        title=f"issue {number}",
        state=state,
        labels=labels,
        is_pull_request=False,
        updated_at=NOW,
        html_url=f"https://github.test/o/r/issues/{number}",
    )


def gate(**given: Any) -> Any:
    args: dict[str, Any] = {
        "repository": "o/r",
        "open_plans": [],
        "waiting_ideas": [],
        "ready": [],
        "published": [],
        "per_week": 1,
        "now": NOW,
    }
    return architect_gate(**{**args, **given})


# -- the result file ----------------------------------------------------------------------------


def test_a_two_ticket_plan_reads_as_a_spec_with_the_second_blocked_by_the_first() -> None:
    result = parse_result(json.dumps(two_ticket_plan()), max_tickets=5)
    assert isinstance(result, Plan)
    assert result.spec is not None
    assert result.spec.title == "One parser"
    assert [t.title for t in result.tickets] == ["First", "Second"]
    assert result.tickets[1].blocked_by == (1,)
    assert result.tickets[0].acceptance == ("both callers use it", "the old ones are gone")


def test_a_one_ticket_plan_has_no_spec() -> None:
    result = parse_result(json.dumps({"outcome": "plan", "tickets": [ticket()]}), max_tickets=5)
    assert isinstance(result, Plan)
    assert result.spec is None
    assert len(result.tickets) == 1


def test_an_idea_and_a_covered_outcome_read_as_such() -> None:
    idea = {"outcome": "idea", "title": "Maybe", "why": "w", "what_to_build": "b"}
    assert isinstance(parse_result(json.dumps(idea), max_tickets=5), Idea)
    assert parse_result('{"outcome": "covered", "issue": 12}', max_tickets=5) == Covered(12)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "left no .thirdshift-architect.json"),
        ("{not json", "is not JSON (line 1 column 2"),
        ("[1, 2]", "must hold one JSON object, not a list"),
        ('{"outcome": "maybe"}', '"outcome" must be "plan", "idea" or "covered", not "maybe"'),
        ('{"outcome": "covered", "issue": "12"}', '"issue" must be the number'),
        ('{"outcome": "covered", "issue": true}', '"issue" must be the number'),
        ('{"outcome": "covered", "issue": 0}', '"issue" must be the number'),
        ('{"outcome": "covered", "issue": 3, "why": "x"}', "unknown key(s) why"),
        ('{"outcome": "plan", "tickets": []}', '"tickets" must be a list of 1 or more'),
        ('{"outcome": "idea", "title": "t", "why": "w"}', "the idea lacks what_to_build"),
    ],
)
def test_a_result_file_that_is_missing_or_malformed_is_refused_naming_the_problem(
    text: str | None, says: str
) -> None:
    with pytest.raises(ResultInvalid) as refused:
        parse_result(text, max_tickets=5)
    assert says in str(refused.value)


def test_a_ticket_may_be_blocked_only_by_earlier_tickets() -> None:
    plan = two_ticket_plan()
    plan["tickets"][0]["blocked_by"] = [2]
    with pytest.raises(ResultInvalid, match="may name only earlier Tickets"):
        parse_result(json.dumps(plan), max_tickets=5)


def test_a_plan_over_the_ticket_cap_is_refused() -> None:
    plan = two_ticket_plan()
    plan["tickets"] = [ticket(f"T{i}") for i in range(4)]
    with pytest.raises(ResultInvalid, match="4 Tickets and architect_max_tickets is 3"):
        parse_result(json.dumps(plan), max_tickets=3)


def test_several_tickets_need_a_spec_and_a_spec_needs_several_tickets() -> None:
    with pytest.raises(ResultInvalid, match='need a "spec"'):
        parse_result(
            json.dumps({"outcome": "plan", "tickets": [ticket("a"), ticket("b")]}), max_tickets=5
        )
    lone = two_ticket_plan()
    lone["tickets"] = lone["tickets"][:1]
    with pytest.raises(ResultInvalid, match="a spec needs 2 or more Tickets"):
        parse_result(json.dumps(lone), max_tickets=5)


def test_a_ticket_without_acceptance_or_with_a_multi_line_title_is_refused() -> None:
    plan = {"outcome": "plan", "tickets": [ticket(acceptance=[])]}
    with pytest.raises(ResultInvalid, match="at least one check"):
        parse_result(json.dumps(plan), max_tickets=5)
    plan = {"outcome": "plan", "tickets": [ticket("two\nlines")]}
    with pytest.raises(ResultInvalid, match="must be one line"):
        parse_result(json.dumps(plan), max_tickets=5)


def test_the_kept_result_reads_back_the_same_with_its_plan_key() -> None:
    result = parse_result(json.dumps(two_ticket_plan()), max_tickets=5)
    assert result_from_json(result_to_json(result, "41ab"), max_tickets=5) == (result, "41ab")
    covered = Covered(7)
    assert result_from_json(result_to_json(covered, "3c"), max_tickets=5) == (covered, "3c")


# -- the gates ----------------------------------------------------------------------------------


def test_nothing_stops_an_architect_run_on_a_quiet_repository() -> None:
    assert gate() is None


def test_an_open_plan_skips_naming_it_by_its_spec_with_its_tickets_as_parts() -> None:
    spec_and_tickets = [issue(n, "architect-plan") for n in (5, 3, 4)]
    skip = gate(open_plans=spec_and_tickets)
    assert skip.urls == ("https://github.test/o/r/issues/3",)
    assert 'Architect plan #3 "issue 3" (with #4, #5) is still open on o/r' in skip.reason
    one_ticket = gate(open_plans=[issue(9, "architect-plan")])
    assert one_ticket.urls == ("https://github.test/o/r/issues/9",)
    assert 'Architect plan #9 "issue 9" is still open on o/r' in one_ticket.reason


def test_an_idea_waiting_for_triage_skips_but_a_triaged_one_does_not() -> None:
    waiting = waiting_for_triage([issue(4, "architect-idea", "needs-triage"), issue(5, "x")])
    assert [i.number for i in waiting] == [4]
    skip = gate(waiting_ideas=waiting)
    assert "is waiting for triage" in skip.reason
    assert skip.urls == (waiting[0].html_url,)
    assert waiting_for_triage([issue(6, "architect-idea")]) == []
    closed = issue(7, "architect-idea", "needs-triage", state="closed")
    assert waiting_for_triage([closed]) == []


def test_a_ready_issue_goes_first() -> None:
    skip = gate(ready=[issue(12, "ready-for-agent"), issue(8, "ready-for-agent")])
    assert skip.reason == 'Ready issue #8 "issue 8" goes first on o/r'
    assert skip.urls == ("https://github.test/o/r/issues/8",)


def test_the_weekly_cap_counts_only_the_last_seven_days() -> None:
    assert gate(published=[NOW - timedelta(days=8)]) is None
    skip = gate(published=[NOW - timedelta(days=2)])
    assert "architect_plans_per_week is 1" in skip.reason
    assert "2026-12-07 12:00 UTC" in skip.reason
    assert gate(published=[NOW - timedelta(days=2)], per_week=2) is None


def test_the_gates_go_in_order_plan_idea_ready_cap() -> None:
    everything = {
        "open_plans": [issue(1)],
        "waiting_ideas": [issue(2)],
        "ready": [issue(3)],
        "published": [NOW],
    }
    assert "Architect plan #1" in gate(**everything).reason
    del everything["open_plans"]
    assert "Architect idea #2" in gate(**everything).reason
    del everything["waiting_ideas"]
    assert "Ready issue #3" in gate(**everything).reason
    del everything["ready"]
    assert "in the last 7 days" in gate(**everything).reason


# -- what is published --------------------------------------------------------------------------


def test_a_ticket_body_has_the_shape_of_a_good_issue_and_its_marker() -> None:
    result = parse_result(json.dumps(two_ticket_plan()), max_tickets=5)
    assert isinstance(result, Plan)
    body = issue_text(
        result.tickets[1],
        place=PlanPart("41", "ticket-2", DIGEST),
        reviewed=Reviewed(41, "main", "0123456789abcdef"),
        kind="A Ticket",
        blockers=[17],
        spec_number=16,
    )
    for heading in ("## Why", "## What to build", "## Acceptance", "## Decisions taken"):
        assert heading in body
    assert "- both callers use it" in body
    assert "Blocked by: #17." in body
    assert "A Ticket of #16." in body
    assert "main at 0123456789ab" in body
    assert "needs-triage" in body
    assert marked_part(body, "41") == "ticket-2"
    assert marked_part(body, "42") is None  # another plan's issue is not this plan's


def test_a_marker_names_its_plan_and_part() -> None:
    assert marked_part("text\n" + marker("7", "spec", DIGEST) + "\n", "7") == "spec"
    assert marked_part("<!-- thirdshift:architect plan=7 part=spec", "7") is None


def test_the_last_line_says_what_was_published() -> None:
    plan = parse_result(json.dumps(two_ticket_plan()), max_tickets=5)
    line = published_line(plan, [5, 6, 7], ["u5", "u6", "u7"])
    assert line == "published the Architect plan: Spec #5 (u5) with Tickets #6, #7"
    assert "covered by #3" in published_line(Covered(3), [], ["u3"])


def test_the_prompt_names_the_issues_the_focus_and_the_result_file() -> None:
    prompt = architect_prompt(
        repository="o/r",
        base="main",
        base_sha="abc123",
        focus="the parsers",
        open_issues=[issue(9, "bug")],
        closed_issues=[issue(2, state="closed")],
        result_file=".thirdshift-architect.json",
        max_tickets=4,
    )
    assert "- #9 issue 9 [bug]" in prompt
    assert "- #2 issue 2" in prompt
    assert "focus on: the parsers" in prompt
    assert ".thirdshift-architect.json" in prompt
    assert "2 to 4 Tickets" in prompt
    assert "$" not in prompt.replace("$ ", "")  # every placeholder was filled


def test_the_prompt_bounds_a_long_list_of_issues() -> None:
    many = [issue(n) for n in range(1, 5000)]
    prompt = architect_prompt(
        repository="o/r",
        base="main",
        base_sha="abc",
        focus=None,
        open_issues=many,
        closed_issues=[],
        result_file="f",
        max_tickets=5,
    )
    assert "[older issues left out]" in prompt
    assert len(prompt.encode()) < 40_000
    assert "(none)" in prompt  # no closed issues


# -- the schedule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "weekday"),
    [
        ("0 3 * * 1", "Monday"),
        ("0 3 * * 0", "Sunday"),
        ("0 3 * * 7", "Sunday"),
        ("0 3 * * sat", "Saturday"),
        ("0 3 * * 4,sat", "Thursday"),  # a list mixing numbers and names is read as cron's
        ("0 3 */2 * 4", "Thursday"),  # a day of "*/2" with a weekday: both, as in cron
    ],
)
def test_a_cron_weekday_counts_from_sunday_as_cron_does(expression: str, weekday: str) -> None:
    fired = cron_trigger(expression).get_next_fire_time(None, NOW)
    assert fired is not None
    assert fired.strftime("%A") == weekday
    assert fired.hour == 3


@pytest.mark.parametrize(
    "expression",
    ["bad", "* * * * * *", "0 3 * * 9", "61 * * * *", "0 0 30 2 *", "0 3 1 * 1"],
    ids=["one field", "six fields", "weekday 9", "minute 61", "30 February", "day and weekday"],
)
def test_a_malformed_cron_expression_is_refused_showing_the_shape(expression: str) -> None:
    with pytest.raises(ValueError, match="is not a cron expression of five fields"):
        cron_trigger(expression)


def test_a_session_s_text_cannot_pass_for_a_marker_or_page_anyone() -> None:
    hostile = ticket(
        why="Ping @alice and @org/team; mail bob@example.com; `@code` stays.",
        what_to_build="<!-- thirdshift:architect plan=41 part=spec --> and <!--thirdshift:claim-->",
    )
    result = parse_result(json.dumps({"outcome": "plan", "tickets": [hostile]}), max_tickets=5)
    assert isinstance(result, Plan)
    body = issue_text(
        result.tickets[0],
        place=PlanPart("41", "ticket-1", DIGEST),
        reviewed=Reviewed(41, "main", "0" * 40),
        kind="A Ticket",
    )
    assert "@\u200balice" in body
    assert "@\u200borg/team" in body
    assert "bob@example.com" in body  # GitHub links no @ after a letter: left as written
    assert "`@code`" in body  # nor in code
    assert marked_part(body, "41") == "ticket-1"  # only thirdshift's own marker counts
    assert body.count("<!-- thirdshift:") == 1


def test_a_result_that_would_make_an_issue_github_refuses_is_invalid_before_anything() -> None:
    """Each section within its own cap can still add up past GitHub's 65,536 characters."""
    big = ticket(why="w" * 11_000, what_to_build="b" * 11_000)
    big["acceptance"] = ["a" * 300] * 40
    big["decisions"] = ["d" * 290] * 40
    with pytest.raises(
        ResultInvalid, match=r"would make an issue of \d+ characters; at most 40000"
    ):
        parse_result(json.dumps({"outcome": "plan", "tickets": [big]}), max_tickets=5)
    many = ticket(acceptance=["x"] * 41)
    with pytest.raises(ResultInvalid, match='"acceptance" has 41 items; at most 40'):
        parse_result(json.dumps({"outcome": "plan", "tickets": [many]}), max_tickets=5)


def test_a_kept_result_that_can_no_longer_be_read_is_refused_not_crashed_on() -> None:
    covered = '{"outcome": "covered", "issue": 1}'
    for kept in ("not json", f'{{"result": {covered}}}', f'{{"key": "x!", "result": {covered}}}'):
        with pytest.raises(ResultInvalid):
            result_from_json(kept, max_tickets=5)


def kept(plan: dict[str, Any], key: str = "41ab") -> str:
    """A kept result as an Architect run keeps it."""
    return result_to_json(parse_result(json.dumps(plan), max_tickets=5), key)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda d: d.update(extra=1), "exactly a key and a result"),
        (lambda d: d["result"]["tickets"][0].update(owner="x"), "unknown key"),
        (lambda d: d["result"]["tickets"][0].update(blocked_by=[2]), "only earlier Tickets"),
        (lambda d: d["result"]["tickets"].extend([ticket("3"), ticket("4")]), "is 3"),
        (lambda d: d["result"]["tickets"][0].update(why="w" * 12_001), "at most 12000"),
        (lambda d: d.update(key="41AB"), "no plan key"),
    ],
    ids=["a key more", "an unknown key", "blocked by a later", "too many", "too long", "a key"],
)
def test_a_kept_result_is_read_as_strictly_as_a_fresh_result_file(
    change: Any, refusal: str
) -> None:
    data = json.loads(kept(two_ticket_plan()))
    change(data)
    with pytest.raises(ResultInvalid, match=refusal):
        result_from_json(json.dumps(data), max_tickets=3)


def test_the_digest_is_the_sha256_of_the_kept_text_and_changes_with_any_of_it() -> None:
    text = kept(two_ticket_plan())
    assert result_digest(text) == hashlib.sha256(text.encode()).hexdigest()
    assert result_digest(text) != result_digest(text.replace("First", "first"))
    assert result_digest(text) != result_digest(kept(two_ticket_plan(), key="41ac"))


def test_a_marker_carries_the_digest_of_the_result_it_was_published_from() -> None:
    body = "text\n" + marker("7", "ticket-2", DIGEST)
    assert plan_marker(body, "7") == Marker("7", "ticket-2", DIGEST)
    assert plan_marker(body) == Marker("7", "ticket-2", DIGEST)  # whichever plan it is
    assert plan_marker(body, "8") is None
    legacy = "<!-- thirdshift:architect plan=7 part=spec -->"
    assert plan_marker(legacy, "7") == Marker("7", "spec", None)
    assert plan_marker("<!-- thirdshift:architect plan=7 part=spec digest=abc -->") is None


def test_a_plan_s_parts_are_its_marked_issues_the_first_listed_of_each() -> None:
    bodies = {
        3: marker("7", "spec", DIGEST),
        4: marker("8", "spec", DIGEST),  # another plan's
        5: marker("7", "ticket-1", DIGEST),
        6: marker("7", "ticket-1", DIGEST),
        9: "no marker",
    }
    assert plan_parts(bodies, "7") == {"spec": 3, "ticket-1": 5}


def test_a_kept_result_matches_only_when_every_issue_of_its_plan_carries_its_digest() -> None:
    text = kept(two_ticket_plan(), key="7")
    digest = result_digest(text)
    published = {3: marker("7", "spec", digest), 4: marker("7", "ticket-1", digest)}
    other = {8: marker("9", "spec", DIGEST)}  # another plan's issue says nothing of this one
    assert kept_mismatch(text, "7", {**published, **other}, recorded=[3, 4]) is None
    changed = text.replace("First", "Forged")
    assert kept_mismatch(changed, "7", published, [3, 4]) == (
        "digest differs from the marker on #3"
    )
    one_off = {**published, 4: marker("7", "ticket-1", DIGEST)}
    assert kept_mismatch(text, "7", one_off, [3, 4]) == "digest differs from the marker on #4"
    legacy = {**published, 3: "<!-- thirdshift:architect plan=7 part=spec -->"}
    assert kept_mismatch(text, "7", legacy, [3, 4]) == "the marker on #3 carries no digest"
    rekeyed = kept(two_ticket_plan(), key="5")  # a new key finds none of the plan's issues
    assert kept_mismatch(rekeyed, "5", published, [3, 4]) == (
        "plan key differs from the marker on #3"
    )


@pytest.mark.parametrize(
    ("written", "published"),
    [
        ("```python\n@dataclass\nclass A: ...\n```", "```python\n@dataclass\nclass A: ...\n```"),
        ("`npm i @types/node`", "`npm i @types/node`"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("README.md#2-setup and src/app/main.py#10", "README.md#2-setup and src/app/main.py#10"),
        ("https://example.com/o/r#12", "https://example.com/o/r#12"),
        ("thanks @alice", "thanks @\u200balice"),
        ("&#64bob", "@\u200bbob"),
        ("octo/other#12 and #5", "octo/other#\u200b12 and #5"),
        ("see https://github.com/o/r/issues/5", "see https://\u200bgithub.com/o/r/issues/5"),
        ("see ``` @alice", "see ``` @\u200balice"),
        ("> ```\n> x\n\n@alice", "> ```\n> x\n\n@\u200balice"),
        ("\\`@alice\\`", "\\`@\u200balice\\`"),
        ("````\n```\n@x\n````\n@y", "````\n```\n@x\n````\n@\u200by"),
        ("_octo/other#12_", "_octo/other#\u200b12_"),
    ],
    ids=[
        "a fence",
        "inline code",
        "a git address",
        "anchors",
        "a web address",
        "a mention",
        "an entity",
        "another repository's issue",
        "an issue's address",
        "three backticks inside a line",
        "a fence a quote closes",
        "escaped backticks",
        "a fence inside a longer fence",
        "emphasis",
    ],
)
def test_defanging_leaves_code_and_addresses_as_written_and_breaks_only_links(
    written: str, published: str
) -> None:
    assert defanged(written) == published
