"""Architect runs in process: the real ``ArchitectRun`` against the GitHub fake, a bare origin
with real git, the real store and scripted ``architect`` sessions that write the result file."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.orchestration.conftest import (
    BUSY,
    PLANTED_TOKEN,
    READY,
    RunWorld,
    ScriptedStarter,
    a_poll,
)
from tests.support.fake_github import open_here
from tests.support.scripted_sessions import git
from thirdshift import bootstrap
from thirdshift.bootstrap import architect_schedules
from thirdshift.daemon import (
    ActivityLog,
    Daemon,
    DaemonParts,
    Limits,
    PollHooks,
    PollParts,
    ReadyRules,
    RepositoryPoll,
    RunWatch,
    StateSources,
)
from thirdshift.errors import ConfigError, GitHubError, NotClaimed
from thirdshift.run_states import RunEnd
from thirdshift.runs.architect.run import ArchitectRequest, ArchitectRun
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.rules.plans import ARCHITECT_RESULT_FILE
from thirdshift.scrub import Scrubber
from thirdshift.sessions import SessionInterrupted

PLAN = "architect-plan"
IDEA = "architect-idea"
TRIAGE = "needs-triage"


def ticket(title: str, blocked_by: list[int] | None = None) -> dict[str, Any]:
    return {
        "title": title,
        "why": f"Why {title}.",
        "what_to_build": f"Build {title}.",
        "acceptance": [f"{title} works"],
        "decisions": [],
        "blocked_by": blocked_by or [],
    }


TWO_TICKETS = {
    "outcome": "plan",
    "spec": {"title": "One parser", "why": "Drift.", "what_to_build": "Fold them."},
    "tickets": [ticket("Shared parser"), ticket("Callers use it", [1])],
}


def writes(result: dict[str, Any] | str) -> Callable[[Path, str], str]:
    """An ``architect`` session that leaves ``result`` (a text as it is) as its result file."""

    def play(worktree: Path, prompt: str) -> str:
        text = result if isinstance(result, str) else json.dumps(result)
        (worktree / ARCHITECT_RESULT_FILE).write_text(text)
        return "wrote the result"

    return play


def architect(
    world: RunWorld,
    *,
    progress: Callable[[str], None] | None = None,
    on_recorded: Callable[[int], None] = lambda _run_id: None,
    **settings: Any,
) -> ArchitectRun:
    return bootstrap.architect_run(
        world.parts(**settings),
        world.hooks(progress=progress or world.lines.append, on_recorded=on_recorded),
        web_host="github.test",
    )


def run_architect(world: RunWorld, **settings: Any) -> int:
    return architect(world, **settings).run(ArchitectRequest("acme", "widgets")).exit_code


def issues_labelled(world: RunWorld, label: str) -> list[int]:
    return [i.number for i in world.github.issues_labelled("acme", "widgets", label, state="all")]


def architect_runs(world: RunWorld) -> list[Any]:
    return [r for r in world.store.list_runs(limit=50) if r.kind == "architect"]


def test_a_two_ticket_plan_is_published_as_a_spec_with_two_sub_issues_the_second_blocked(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    assert run_architect(world) == 0
    spec, first, second = issues_labelled(world, PLAN)
    gh = world.github
    assert gh.issue("acme", "widgets", spec).title == "One parser"
    assert gh.sub_issues("acme", "widgets", spec) == (first, second)
    assert open_here(gh.blockers("acme", "widgets", second)) == (first,)
    assert open_here(gh.blockers("acme", "widgets", first)) == ()
    for number in (spec, first, second):
        assert set(gh.labels_of(number)) == {PLAN, TRIAGE}
    body = gh.issue("acme", "widgets", second).body
    assert "## Acceptance" in body
    assert f"Blocked by: #{first}." in body
    assert world.urls == [gh.issue("acme", "widgets", spec).html_url]
    (run,) = architect_runs(world)
    assert run.state == "succeeded"
    assert run.issue_number is None  # an Architect run works on no issue
    assert run.published == (spec, first, second)
    assert run.last_session_log
    assert [s.kind for s in world.store.run_sessions(run.id)] == ["architect"]
    assert world.lines[-1].startswith(f"published the Architect plan: Spec #{spec}")


def test_a_second_architect_run_is_skipped_naming_the_open_plan(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("Only")]})
    assert run_architect(world) == 0
    (only,) = issues_labelled(world, PLAN)
    world.urls.clear()
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    assert run_architect(world, architect_plans_per_week=10) == 0
    url = world.github.issue("acme", "widgets", only).html_url
    assert world.urls == [url]
    assert f'Architect plan #{only} "Only" is still open' in world.lines[-1]
    assert len(architect_runs(world)) == 1  # a skip records no Run and starts no session
    assert issues_labelled(world, PLAN) == [only]


def test_a_ready_issue_or_a_waiting_idea_skips_the_run_before_any_session(
    world: RunWorld,
) -> None:
    ready = world.github.add_issue("Shaped by a person", labels=[READY])
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    assert run_architect(world) == 0
    assert f"Ready issue #{ready}" in world.lines[-1]
    assert not architect_runs(world)
    world.github.unlabel_issue(ready, READY)
    idea = world.github.add_issue("An idea", labels=[IDEA, TRIAGE])
    assert run_architect(world) == 0
    assert f"Architect idea #{idea}" in world.lines[-1]
    assert not architect_runs(world)


def test_covered_publishes_nothing_and_names_the_covering_issue(world: RunWorld) -> None:
    covering = world.github.add_issue("Fold the parsers")
    world.github.close_issue("acme", "widgets", covering)
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": covering})
    assert run_architect(world) == 0
    assert issues_labelled(world, PLAN) == []
    assert issues_labelled(world, IDEA) == []
    assert world.urls == [world.github.issue("acme", "widgets", covering).html_url]
    assert f"covered by #{covering}" in world.lines[-1]
    (run,) = architect_runs(world)
    assert run.state == "succeeded"
    assert run.published == ()
    # Covered publishes nothing, so it does not count against the weekly cap.
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": covering})
    assert run_architect(world) == 0
    assert len(architect_runs(world)) == 2


def test_covered_by_an_issue_that_does_not_exist_fails_as_an_invalid_result(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": 999})
    assert run_architect(world) == 1
    (run,) = architect_runs(world)
    assert run.state == "failed"
    assert "covered by #999, which is no issue" in (run.cause or "")


def test_an_idea_is_one_issue_labelled_for_triage(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(
        {"outcome": "idea", "title": "Maybe fold", "why": "w", "what_to_build": "b"}
    )
    assert run_architect(world) == 0
    (idea,) = issues_labelled(world, IDEA)
    assert set(world.github.labels_of(idea)) == {IDEA, TRIAGE}
    assert issues_labelled(world, PLAN) == []


def test_an_invalid_result_file_fails_the_run_with_the_parse_error_and_publishes_nothing(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes('{"outcome": "plan", "tickets": [')
    assert run_architect(world) == 1
    (run,) = architect_runs(world)
    assert run.state == "failed"
    assert ".thirdshift-architect.json is not JSON" in (run.cause or "")
    assert run.last_session_log
    assert Path(run.last_session_log).exists()
    assert any(line == f"session log: {run.last_session_log}" for line in world.lines)
    assert "nothing was published" in world.lines
    assert issues_labelled(world, PLAN) == []
    assert world.urls == []
    assert world.github.called("open_issue") == []


def test_a_result_the_scrubbing_makes_invalid_fails_before_anything_is_kept(
    world: RunWorld,
) -> None:
    """A title at its limit that ends with the start of a secret grows past the limit once
    scrubbed: the result is read back before it is kept, so nothing is kept for the next
    Architect run to refuse, and the run says nothing was published."""
    cut_secret = PLANTED_TOKEN[:8]  # a secret cut short still counts, and is redacted
    title = "x" * (200 - len(cut_secret)) + cut_secret
    world.sessions.plays["architect"] = writes(
        {"outcome": "idea", "title": title, "why": "w", "what_to_build": "b"}
    )
    assert run_architect(world) == 1
    (run,) = architect_runs(world)
    assert run.state == "failed"
    assert "at most 200" in (run.cause or "")
    assert world.store.kept_result(run.id) is None
    assert "nothing was published" in world.lines
    assert world.github.called("open_issue") == []


def test_a_missing_result_file_fails_saying_so(world: RunWorld) -> None:
    world.sessions.plays["architect"] = lambda worktree, prompt: "I looked around"
    assert run_architect(world) == 1
    (run,) = architect_runs(world)
    assert "left no .thirdshift-architect.json" in (run.cause or "")


def test_what_the_session_commits_is_discarded_and_nothing_is_pushed(world: RunWorld) -> None:
    before = git(world.origin, "for-each-ref", "--format=%(refname) %(objectname)")

    def commits_then_writes(worktree: Path, prompt: str) -> str:
        (worktree / "scratch.py").write_text("print('experiment')\n")
        git(worktree, "add", "scratch.py")
        git(worktree, "commit", "-q", "-m", "experiment")
        return writes({"outcome": "plan", "tickets": [ticket("Only")]})(worktree, prompt)

    world.sessions.plays["architect"] = commits_then_writes
    assert run_architect(world) == 0
    assert git(world.origin, "for-each-ref", "--format=%(refname) %(objectname)") == before
    assert not (world.settings.home / "worktrees" / "acme-widgets-architect").exists()


def test_the_prompt_names_open_and_recently_closed_issues_and_the_focus(world: RunWorld) -> None:
    still = world.github.add_issue("Still open work")
    done = world.github.add_issue("Done work")
    world.github.close_issue("acme", "widgets", done)
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": done})
    run = architect(world)
    assert run.run(ArchitectRequest("acme", "widgets", focus="the parsers")).exit_code == 0
    prompt = world.sessions.prompts["architect"]
    assert f"#{still} Still open work" in prompt
    assert f"#{done} Done work" in prompt
    assert prompt.index("Still open work") < prompt.index("Recently closed")
    assert "focus on: the parsers" in prompt


def test_a_crash_between_the_spec_and_its_tickets_is_completed_by_the_next_run_without_a_copy(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    # GitHub fails every issue after the Spec: the run fails with its result kept, as a run
    # killed at that moment leaves it (its record then says running, and is recorded crashed).
    world.github.on_call = failing_after(1)
    assert run_architect(world) == 1
    (spec,) = issues_labelled(world, PLAN)
    first = architect_runs(world)[0]
    assert first.state == "failed"
    assert any("publishes the rest of it first" in line for line in world.lines)
    world.github.on_call = None
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": spec})
    assert run_architect(world) == 0
    numbers = issues_labelled(world, PLAN)
    assert numbers[0] == spec
    assert len(numbers) == 3
    assert world.github.sub_issues("acme", "widgets", spec) == tuple(numbers[1:])
    latest = architect_runs(world)[0]
    assert latest.state == "succeeded"
    assert latest.published == tuple(numbers)
    assert world.store.run_sessions(latest.id) == []  # no second review: the same plan


def test_hand_over_labels_the_spec_ready_so_it_runs_as_one_spec_run_and_no_ticket(
    world: RunWorld,
) -> None:
    """The Spec alone is Ready (its Tickets leave triage without it), and a daemon's poll
    then takes the Spec, as a Spec run, labelled by thirdshift itself."""
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    assert run_architect(world, architect_hand_over=True) == 0
    spec, first, second = issues_labelled(world, PLAN)
    assert set(world.github.labels_of(spec)) == {PLAN, READY}
    for number in (first, second):
        assert set(world.github.labels_of(number)) == {PLAN}

    [pickup] = a_poll(world)()

    assert (pickup.number, pickup.spec) == (spec, True)


def test_hand_over_of_a_lone_ticket_labels_the_ticket_ready(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("Lone")]})
    assert run_architect(world, architect_hand_over=True) == 0
    [lone] = issues_labelled(world, PLAN)
    assert set(world.github.labels_of(lone)) == {PLAN, READY}


def test_another_architect_run_on_the_repository_is_not_claimed(world: RunWorld) -> None:
    repository = world.store.ensure_repository("acme", "widgets")
    held = world.store.acquire_lease(
        repository, None, "elsewhere", timedelta(hours=1), now=world.clock.now()
    )
    assert held is not None
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    with pytest.raises(NotClaimed, match="another Architect run works on acme/widgets") as refused:
        run_architect(world)
    assert refused.value.exit_code == 3
    assert issues_labelled(world, PLAN) == []


# -- the daemon's schedule ----------------------------------------------------------------------


def scheduled_daemon(
    world: RunWorld,
    started: list[str],
    *,
    name: str = "d1",
    paused: Callable[[], str | None] = lambda: None,
) -> Daemon:
    """A daemon watching acme/widgets with an Architect schedule of Mondays at 03:00 UTC, on
    the world's manual clock (the store's too), whose Architect runs are the real ones in
    process; ``started`` gets the weekday of each it starts."""
    clock = world.clock
    activity = ActivityLog(
        world.store,
        daemon=name,
        directory=world.settings.home / "activity",
        clock=clock,
        scrub=Scrubber([PLANTED_TOKEN]),
        progress=world.lines.append,
    )

    def start_architect(owner: str, name: str, watch: RunWatch) -> RunOutcome:
        started.append(f"{clock.now():%a}")
        run = architect(world, progress=watch.progress, on_recorded=watch.on_recorded)
        return run.run(ArchitectRequest(owner, name))

    # As the composition root reads them: the setting's spelling of the name does not matter.
    configured = world.settings.model_copy(
        update={"architect_schedule": {"ACME/Widgets": "0 3 * * 1"}}
    )
    starter = ScriptedStarter(
        lambda _request, _watch: RunOutcome(RunEnd.READY, 0), architects=start_architect
    )
    parts = DaemonParts(starter, world.store, activity, clock, world.lines.append, "github.test")
    daemon = Daemon(
        parts,
        Limits(2, 1, 60, 0, 60, 60),
        threading.Event(),
        shown=StateSources(name=name),
        architect_schedules=architect_schedules(configured, ["acme/widgets"]),
    )
    rules = ReadyRules.of(
        ready_label=READY, in_progress_label=BUSY, excluded_labels=[TRIAGE], settle_seconds=0
    )
    hooks = PollHooks(
        running_here=lambda n: daemon.running_here("acme/widgets", n),
        stop_here=lambda n, why: None,
        kept_worktree=lambda branch: False,
    )
    poll_parts = PollParts(
        store=world.store, rules=rules, activity=activity, clock=clock, paused=paused
    )
    daemon.watch(RepositoryPoll("acme", "widgets", world.github, poll_parts, hooks))
    return daemon


def test_the_daemon_s_architect_schedule_fires_with_a_fast_clock_and_the_gates_hold(
    world: RunWorld,
) -> None:
    """Mondays at 03:00 UTC, and the clock moves a day per poll from a Thursday noon: the first
    Monday publishes a one-Ticket plan; the next Monday is skipped because it is still open."""
    world.clock.advance(12 * 3600)
    assert f"{world.clock.now():%a %H}" == "Thu 12"
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("Only")]})
    started: list[str] = []
    daemon = scheduled_daemon(world, started)
    for _day in range(12):
        assert daemon.once() == 0
        world.clock.advance(24 * 3600)
    assert started == ["Mon", "Mon"]  # the two Mondays after the start, none in between
    (plan,) = issues_labelled(world, PLAN)
    messages = [a.message for a in world.store.activity(limit=100)]
    assert any(m.startswith("Architect run") and f"published #{plan}" in m for m in messages)
    assert any(
        m.startswith("Architect run skipped: Architect plan") and f"#{plan}" in m for m in messages
    )
    assert len(architect_runs(world)) == 1


def test_a_scheduled_time_another_daemon_already_ran_is_not_run_again(world: RunWorld) -> None:
    world.clock.advance(12 * 3600)
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": 1})
    world.github.add_issue("Already asked for")
    first: list[str] = []
    second: list[str] = []
    one = scheduled_daemon(world, first, name="d1")
    other = scheduled_daemon(world, second, name="d2")
    world.clock.advance(4 * 24 * 3600)  # Monday noon
    assert one.once() == 0
    assert other.once() == 0
    assert first == ["Mon"]
    assert second == []  # the database shows this Monday's run: covered, one review only
    assert len(architect_runs(world)) == 1


def test_a_due_architect_run_waits_while_the_provider_is_down_then_runs(world: RunWorld) -> None:
    world.clock.advance(12 * 3600)
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("Only")]})
    started: list[str] = []
    down = ["claude's provider is overloaded (529)"]
    daemon = scheduled_daemon(world, started, paused=lambda: down[0] if down else None)
    world.clock.advance(4 * 24 * 3600)  # Monday noon: due
    assert daemon.once() == 0
    assert started == []
    assert architect_runs(world) == []
    down.clear()
    world.clock.advance(3600)  # still Monday, the provider back: the due run starts now
    assert daemon.once() == 0
    assert started == ["Mon"]


def test_a_half_published_plan_a_person_closed_is_not_completed(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)  # the Spec, then GitHub fails
    assert run_architect(world) == 1
    world.github.on_call = None
    (spec,) = issues_labelled(world, PLAN)
    assert architect_runs(world)[0].published == (spec,)  # on the record as it happened
    world.github.close_issue("acme", "widgets", spec)  # a person answered the half plan
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": spec})
    assert run_architect(world) == 0
    assert any(
        f"#{spec} of it was closed since, so it is not completed" in line for line in world.lines
    )
    assert issues_labelled(world, PLAN) == [spec]  # no Ticket opened under the closed Spec
    latest = architect_runs(world)[0]
    assert [s.kind for s in world.store.run_sessions(latest.id)] == ["architect"]  # a new review


def test_an_architect_run_paused_past_its_lease_publishes_nothing_once_another_holds_it(
    world: RunWorld,
) -> None:
    def paused_then_writes(worktree: Path, prompt: str) -> str:
        world.take_lease_over(None)  # as if SIGSTOPped past its Lease meanwhile
        return writes(TWO_TICKETS)(worktree, prompt)

    world.sessions.plays["architect"] = paused_then_writes
    assert run_architect(world) == 1
    assert world.github.called("open_issue") == []
    assert world.github.called("ensure_label") == []
    (run,) = architect_runs(world)
    assert run.state == "failed"
    assert "lost the repository's Architect Lease" in (run.cause or "")
    assert world.store.architect_result(run.id) is None  # its successor decides, not it


def test_a_schedule_for_a_repository_the_daemon_does_not_watch_stops_it_at_start(
    world: RunWorld,
) -> None:
    configured = world.settings.model_copy(
        update={"architect_schedule": {"acme/gadgets": "0 3 * * 1"}}
    )
    with pytest.raises(ConfigError, match="architect_schedule names acme/gadgets, which this"):
        architect_schedules(configured, ["acme/widgets"])


def test_the_schedule_s_next_time_is_strictly_after_the_one_given(world: RunWorld) -> None:
    configured = world.settings.model_copy(
        update={"architect_schedule": {"acme/widgets": "0 3 * * 1"}}
    )
    [next_after] = architect_schedules(configured, ["acme/widgets"]).values()
    monday = datetime(2026, 12, 7, 3, tzinfo=UTC)
    assert next_after(monday) == monday + timedelta(days=7)  # a run on the minute is not due again
    assert next_after(monday - timedelta(seconds=5)) == monday


def failing_after(opens: int) -> Callable[[str], None]:
    """GitHub answering 502 to every issue opened after the first ``opens``."""
    opened: list[str] = []

    def on_call(method: str) -> None:
        if method == "open_issue":
            opened.append(method)
            if len(opened) > opens:
                raise GitHubError("502 Bad Gateway (GitHub)", 502)

    return on_call


def test_a_kept_result_none_of_which_reached_github_is_let_go_for_a_new_review(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(0)
    assert run_architect(world) == 1
    world.github.on_call = None
    ready = world.github.add_issue("Shaped by a person meanwhile", labels=[READY])
    assert run_architect(world) == 0  # the gates hold: nothing was completed behind them
    assert any("none of it reached GitHub" in line for line in world.lines)
    assert f"Ready issue #{ready}" in world.lines[-1]
    assert issues_labelled(world, PLAN) == []


def test_a_plan_github_keeps_refusing_is_left_for_a_person_after_three_runs(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)  # the Spec, then never a Ticket
    assert run_architect(world) == 1  # the review, and the Spec
    for _completion in range(3):
        assert run_architect(world) == 1
    (spec,) = issues_labelled(world, PLAN)
    world.github.on_call = None
    assert run_architect(world) == 0
    assert any("3 runs in a row failed to publish the rest of it" in line for line in world.lines)
    assert "Architect plan #" in world.lines[-1]  # the open Spec skips: a person looks at it
    assert issues_labelled(world, PLAN) == [spec]


def test_an_old_plan_s_markers_from_another_database_are_never_taken_for_this_one(
    world: RunWorld,
) -> None:
    """A workflow's own SQLite starts its Run ids at 1 again: markers must not collide."""
    old = world.github.add_issue(
        "An old plan's Ticket",
        body="<!-- thirdshift:architect plan=1 part=ticket-1 -->",
        labels=[PLAN],
    )
    world.github.close_issue("acme", "widgets", old)
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("New")]})
    assert run_architect(world) == 0
    numbers = issues_labelled(world, PLAN)
    assert len(numbers) == 2
    (run,) = architect_runs(world)
    assert run.published == (numbers[1],)
    assert world.github.issue("acme", "widgets", numbers[1]).title == "New"


def test_a_secret_the_session_wrote_is_neither_kept_nor_published(world: RunWorld) -> None:
    leaky = ticket("Rotate the key")
    leaky["why"] = f"The key {PLANTED_TOKEN} is in the config."
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [leaky]})
    assert run_architect(world) == 0
    (number,) = issues_labelled(world, PLAN)
    assert PLANTED_TOKEN not in world.github.issue("acme", "widgets", number).body
    (run,) = architect_runs(world)
    assert PLANTED_TOKEN not in (world.store.architect_result(run.id) or "")


def test_the_team_hears_once_of_a_published_plan_and_of_a_failed_architect_run(
    world: RunWorld,
) -> None:
    target = world.notify_to()
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("Only")]})
    assert run_architect(world) == 0
    (plan,) = issues_labelled(world, PLAN)
    [(published, _)] = target.sent
    assert (published.kind, published.state) == ("architect", "published")
    assert published.issue_url == world.github.issue("acme", "widgets", plan).html_url
    world.github.close_issue("acme", "widgets", plan)
    world.sessions.plays["architect"] = writes("{broken")
    assert run_architect(world, architect_plans_per_week=5) == 1
    [_, (failed, _)] = target.sent
    assert failed.state == "failed"
    assert failed.cause is not None
    assert "is not JSON" in failed.cause
    assert failed.issue_url == "https://github.test/acme/widgets/issues"


def test_completing_a_plan_with_hand_over_also_hands_over_what_the_first_run_opened(
    world: RunWorld,
) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(2)  # the Spec and the first Ticket, then GitHub fails
    assert run_architect(world, architect_hand_over=True) == 1
    world.github.on_call = None
    spec, first = issues_labelled(world, PLAN)
    assert run_architect(world, architect_hand_over=True) == 0
    _, _, second = issues_labelled(world, PLAN)
    assert set(world.github.labels_of(spec)) == {PLAN, READY}
    for number in (first, second):
        assert set(world.github.labels_of(number)) == {PLAN}


def test_a_plan_published_in_two_runs_counts_once_against_the_weekly_cap(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)
    assert run_architect(world, architect_plans_per_week=2) == 1
    world.github.on_call = None
    assert run_architect(world, architect_plans_per_week=2) == 0  # completes it
    for number in issues_labelled(world, PLAN):
        world.github.close_issue("acme", "widgets", number)
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("More")]})
    assert run_architect(world, architect_plans_per_week=2) == 0
    assert world.lines[-1].startswith("published the Architect plan #")  # not yet at the cap
    repository = world.store.ensure_repository("acme", "widgets")
    week_ago = world.clock.now() - timedelta(days=7)
    assert len(world.store.architect_publications(repository, week_ago)) == 2


def test_an_architect_run_stopped_by_a_signal_mid_session_publishes_nothing_and_says_so(
    world: RunWorld,
) -> None:
    target = world.notify_to()

    def stopped(worktree: Path, prompt: str) -> str:
        (worktree / ARCHITECT_RESULT_FILE).write_text(json.dumps(TWO_TICKETS))
        world.interrupt.set()  # SIGTERM or Ctrl-C, as the signal handler sets it
        raise SessionInterrupted("architect: the session was stopped (SIGTERM)")

    world.sessions.plays["architect"] = stopped
    assert run_architect(world) == 1
    assert issues_labelled(world, PLAN) == []
    assert "the Architect run was interrupted: architect: the session was stopped" in " ".join(
        world.lines
    )
    (run,) = architect_runs(world)
    assert run.state == "failed"
    assert world.store.architect_result(run.id) is None  # a later run starts afresh
    assert not (world.settings.home / "worktrees" / "acme-widgets-architect").exists()
    [(told, _)] = target.sent
    assert told.state == "interrupted"


def test_a_plan_left_half_published_still_counts_against_the_weekly_cap(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)  # the Spec only
    assert run_architect(world) == 1
    world.github.on_call = None
    (spec,) = issues_labelled(world, PLAN)
    world.github.close_issue("acme", "widgets", spec)  # a person answers the half plan
    world.sessions.plays["architect"] = writes({"outcome": "plan", "tickets": [ticket("More")]})
    assert run_architect(world) == 0
    assert "architect_plans_per_week is 1" in world.lines[-1]  # skipped: the week's plan was it


def test_completing_with_hand_over_leaves_a_ticket_a_person_triaged_alone(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(2)  # the Spec and the first Ticket
    assert run_architect(world, architect_hand_over=True) == 1
    world.github.on_call = None
    _, first = issues_labelled(world, PLAN)
    world.github.unlabel_issue(first, TRIAGE)  # triaged: not for an agent yet, says a person
    assert run_architect(world, architect_hand_over=True) == 0
    spec, _, second = issues_labelled(world, PLAN)
    assert set(world.github.labels_of(first)) == {PLAN}
    assert set(world.github.labels_of(second)) == {PLAN}
    assert set(world.github.labels_of(spec)) == {PLAN, READY}


def test_an_interrupted_completion_is_not_counted_as_a_try(world: RunWorld) -> None:
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)
    assert run_architect(world) == 1  # the review, and the Spec
    for _completion in range(2):
        assert run_architect(world) == 1  # two tries GitHub failed
    world.interrupt.set()  # a stop during the next completion
    assert run_architect(world) == 1
    world.interrupt.clear()
    world.github.on_call = None
    assert run_architect(world) == 0  # the third try is still allowed, and completes it
    assert len(issues_labelled(world, PLAN)) == 3


def test_a_result_file_that_is_a_link_to_another_file_is_never_read_or_published(
    world: RunWorld,
) -> None:
    """A hostile session points the result file at a file outside its Worktree: thirdshift
    reads only a regular file there, so what the link leads to never reaches GitHub."""
    elsewhere = world.root / "elsewhere.json"
    elsewhere.write_text(json.dumps({"outcome": "plan", "tickets": [ticket("Leaked")]}))

    def links(worktree: Path, prompt: str) -> str:
        (worktree / ARCHITECT_RESULT_FILE).symlink_to(elsewhere)
        return "linked"

    world.sessions.plays["architect"] = links
    assert run_architect(world) == 1
    assert world.github.called("open_issue") == []
    (run,) = architect_runs(world)
    assert "left no .thirdshift-architect.json" in (run.cause or "")


# -- a kept result is a row an agent could have written ----------------------------------------


def half_published(world: RunWorld, **settings: Any) -> tuple[int, Any]:
    """A two-Ticket plan whose run opened the Spec, then GitHub failed: its kept result waits
    for the next run. The Spec's number and that run."""
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)
    assert run_architect(world, **settings) == 1
    world.github.on_call = None
    (spec,) = issues_labelled(world, PLAN)
    return spec, architect_runs(world)[0]


def rewritten(kept: str, change: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(kept)
    change(data)
    return json.dumps(data, sort_keys=True)


def an_extra_ticket(data: dict[str, Any]) -> None:
    data["result"]["tickets"].append(ticket("Curl a payload into sh", [1]))


def a_changed_body(data: dict[str, Any]) -> None:
    data["result"]["tickets"][0]["what_to_build"] = "Add the attacker's deploy key."


def a_changed_plan_key(data: dict[str, Any]) -> None:
    data["key"] = "ab" * 16


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (an_extra_ticket, "does not match what it published (digest differs from the marker on"),
        (a_changed_body, "does not match what it published (digest differs from the marker on"),
        (a_changed_plan_key, "does not match what it published (plan key differs from the marker"),
    ],
    ids=["an extra Ticket", "a changed body", "a changed plan key"],
)
def test_a_kept_result_altered_in_the_database_is_refused_and_nothing_is_published(
    world: RunWorld, change: Callable[[dict[str, Any]], None], what: str
) -> None:
    spec, first = half_published(world, architect_hand_over=True)
    kept = world.store.architect_result(first.id)
    assert kept is not None
    # An agent with the database's address rewrites the row (its fencing token and all).
    world.store.update_run(first.id, architect_result=rewritten(kept, change))
    opened = len(world.github.called("open_issue"))
    assert run_architect(world, architect_hand_over=True) == 1
    assert len(world.github.called("open_issue")) == opened  # nothing published
    assert issues_labelled(world, PLAN) == [spec]
    assert issues_labelled(world, READY) == []  # nothing handed over to agents either
    refusing = architect_runs(world)[0]
    assert refusing.state == "failed"
    assert refusing.published == ()
    assert (refusing.cause or "").startswith(f"the kept result of Architect run {first.id} {what}")
    assert f"#{spec}" in (refusing.cause or "")
    assert (refusing.cause or "").endswith("; nothing was published")
    assert "nothing was published" in world.lines
    # Not tried again: the next run goes through the gates, and the open Spec stops it.
    assert run_architect(world, architect_hand_over=True) == 0
    assert f"Architect plan #{spec}" in world.lines[-1]
    assert len(world.github.called("open_issue")) == opened


def test_a_kept_result_that_no_longer_reads_is_refused_naming_the_run(world: RunWorld) -> None:
    spec, first = half_published(world)
    world.store.update_run(first.id, architect_result='{"key": "ab", "result": {"outcome": ')
    assert run_architect(world) == 1
    assert issues_labelled(world, PLAN) == [spec]
    refusing = architect_runs(world)[0]
    assert (refusing.cause or "").startswith(
        f"the kept result of Architect run {first.id} cannot be read (the kept Architect result "
        "is not JSON"
    )


def test_a_result_kept_without_the_architect_lease_is_not_completed(world: RunWorld) -> None:
    spec, first = half_published(world)
    kept = world.store.architect_result(first.id)
    # The same row as written by a write that holds no Lease (no fencing token with it).
    world.store.update_run(first.id, architect_result=kept, architect_fencing_token=None)
    assert run_architect(world) == 0
    assert any(
        f"Architect run {first.id} stopped before it finished publishing; its result was not "
        "kept under the repository's Architect Lease, so it is not completed" in line
        for line in world.lines
    )
    assert issues_labelled(world, PLAN) == [spec]  # the open Spec then skips the run
    assert f"Architect plan #{spec}" in world.lines[-1]
    assert world.store.architect_result(first.id) is None  # let go


def test_every_issue_of_a_plan_completed_in_two_runs_carries_the_digest_of_its_kept_result(
    world: RunWorld,
) -> None:
    spec, first = half_published(world)
    kept = world.store.architect_result(first.id)
    assert kept is not None
    assert run_architect(world) == 0
    numbers = issues_labelled(world, PLAN)
    assert len(numbers) == 3
    assert numbers[0] == spec
    digest = hashlib.sha256(kept.encode()).hexdigest()
    for number in numbers:
        assert world.github.issue("acme", "widgets", number).body.endswith(f"digest={digest} -->")
    latest = architect_runs(world)[0]
    assert world.store.kept_result(latest.id) is not None
