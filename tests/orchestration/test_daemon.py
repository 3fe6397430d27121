"""The daemon in process: real polls, the real ``Delivery`` of each Run, the GitHub fake on the
stand-in's state model, real git and SQLite, scripted sessions. ``Daemon.once`` is one cycle."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from tests.orchestration.conftest import (
    BUSY,
    PLANTED_TOKEN,
    PR_TEXT,
    READY,
    RunWorld,
    ScriptedStarter,
)
from tests.support.scripted_sessions import commit_file, git
from thirdshift import bootstrap
from thirdshift.clock import ManualClock
from thirdshift.daemon import (
    ActivityLog,
    Daemon,
    DaemonParts,
    Limits,
    Pickup,
    PollHooks,
    PollParts,
    ProviderPauses,
    ReadyRules,
    RepositoryPoll,
    RunWatch,
    StateSources,
    WatchTimes,
)
from thirdshift.errors import GitHubError
from thirdshift.git import own_git_dir
from thirdshift.issue_url import IssueRef
from thirdshift.notify import ScriptedTarget, TargetNotifier
from thirdshift.records import ProviderOutage, Repository, Usage
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs import RunRequest
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.rules.branches import UNADOPTED
from thirdshift.runs.scope import RunHooks
from thirdshift.scrub import Scrubber
from thirdshift.sessions.rules import ProviderUnavailable
from thirdshift.store import Store

MAINTAINER = "maintainer"
READER = "drive-by"


def daemon_starter(
    world: RunWorld, work: Callable[[RunRequest, RunHooks], RunOutcome]
) -> Callable[[RunRequest, RunWatch], RunOutcome]:
    """The daemon's Runs over ``work`` (a Run, or what the composition root chooses): the
    world's hooks for the daemon's Run from its watch, its id recorded as the daemon learns
    it, an error before its end made its outcome."""

    def start(request: RunRequest, watch: RunWatch) -> RunOutcome:
        recorded: list[int] = []

        def recording(run_id: int) -> None:
            recorded.append(run_id)
            watch.on_recorded(run_id)

        hooks = world.hooks(
            progress=watch.progress,
            interrupt=watch.interrupt,
            claimant="daemon d1",
            stopped_because=watch.stopped_because,
            on_recorded=recording,
        )
        scrub = Scrubber([PLANTED_TOKEN])
        return bootstrap.outcome_of(lambda: work(request, hooks), watch.progress, scrub, recorded)

    return start


@dataclass
class DaemonWorld:
    world: RunWorld
    max_runs: int = 2
    max_runs_per_repository: int = 1
    settle_seconds: float = 0
    start_run: Callable[[RunRequest, RunWatch], RunOutcome] | None = None
    """What a pickup's or a Rescue's Run is (default: the real ``Delivery``)."""
    daily_budget_usd: float | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    paused: Callable[[], str | None] = lambda: None

    def __post_init__(self) -> None:
        self.world.github.add_user(MAINTAINER, "maintain")
        self.world.github.add_user(READER, "read")
        self.notified = ScriptedTarget("pass-overs")
        # With a daily budget, the poll's day must be the store's (whose clock is manual).
        start = self.world.clock.now() if self.daily_budget_usd else datetime.now(UTC)
        self.poll_clock = ManualClock(start)
        self.activity = ActivityLog(
            self.world.store,
            daemon="d1",
            directory=self.world.settings.home / "activity",
            clock=self.poll_clock,
            scrub=Scrubber([PLANTED_TOKEN]),
            progress=self.world.lines.append,
        )
        self.starter = ScriptedStarter(self.start_run or daemon_starter(self.world, self._deliver))
        self.daemon = self.daemon_of(self.starter, max_runs=self.max_runs)
        rules = ReadyRules.of(
            ready_label=READY,
            in_progress_label=BUSY,
            excluded_labels=["needs-triage", "wontfix"],
            settle_seconds=self.settle_seconds,
            daily_budget_usd=self.daily_budget_usd,
        )
        notifier = TargetNotifier(
            [self.notified], scrub=Scrubber([PLANTED_TOKEN]), progress=self.world.lines.append
        )
        parts = PollParts(
            store=self.world.store,
            rules=rules,
            activity=self.activity,
            clock=self.poll_clock,
            paused=self.paused,
            notifier=notifier,
        )
        hooks = PollHooks(
            running_here=lambda n: self.daemon.running_here("acme/widgets", n),
            stop_here=lambda n, why: self.daemon.stop_here("acme/widgets", n, why),
            kept_worktree=lambda b: (
                self.world.settings.home / "worktrees" / f"acme-widgets-{b}"
            ).is_dir(),
        )
        self.poll = RepositoryPoll("acme", "widgets", self.world.github, parts, hooks)
        self.daemon.watch(self.poll)

    def pick_up(self, request: RunRequest, progress: Callable[[str], None]) -> RunOutcome:
        """The pickup's Run as the daemon's starter runs it, started by hand: an interrupt of
        its own, never stopped by the daemon."""
        watch = RunWatch(threading.Event(), progress, lambda _run_id: None, lambda: None)
        return self.starter.pickup(request, watch)

    def daemon_of(
        self,
        starter: ScriptedStarter,
        *,
        max_runs: int,
        max_runs_per_repository: int | None = None,
        stop_seconds: float = 60,
        shown: StateSources | None = None,
        poll_seconds: float = 60,
        poll_seconds_with_webhooks: float | None = None,
        owner_refresh_seconds: float = 300,
    ) -> Daemon:
        """A daemon of this world that starts its Runs through ``starter``, within the limits
        given (per repository: this world's, unless given)."""
        parts = DaemonParts(
            starter=starter,
            store=self.world.store,
            activity=self.activity,
            clock=self.poll_clock,
            progress=self.world.lines.append,
            web_host="github.test",
        )
        limits = Limits(
            max_runs=max_runs,
            max_runs_per_repository=max_runs_per_repository or self.max_runs_per_repository,
            poll_seconds=poll_seconds,
            poll_jitter_seconds=0,
            reap_seconds=60,
            stop_seconds=stop_seconds,
            watch_times=WatchTimes(owner_refresh_seconds, poll_seconds_with_webhooks),
        )
        return Daemon(parts, limits, self.stop, shown=shown)

    def _deliver(self, request: RunRequest, hooks: RunHooks) -> RunOutcome:
        return bootstrap.delivery(self.world.parts(), hooks).run(request)

    def ready_issue(self, title: str, labeller: str = MAINTAINER) -> int:
        number = self.world.github.add_issue(title, f"Please do: {title}")
        self.label(number, READY, labeller)
        return number

    def label(self, number: int, label: str, actor: str) -> None:
        gh = self.world.github
        gh.world.add_labels(gh.repo_state, gh.repo_state.issue(number), [label], actor)

    def unlabel(self, number: int, label: str, actor: str) -> None:
        gh = self.world.github
        gh.world.remove_label(gh.repo_state, gh.repo_state.issue(number), label, actor)

    def close(self, number: int) -> None:
        gh = self.world.github
        gh.world.set_state(gh.repo_state, gh.repo_state.issue(number), "closed", None, MAINTAINER)

    def lines(self, kind: str) -> list[str]:
        return [a.message for a in self.world.store.activity() if a.kind == kind]

    def claim_comments(self, number: int) -> list[str]:
        return [c for c in self.world.github.comments_on(number) if CLAIM_MARKER in c]

    def crashed_run(self, number: int, *, branch: str | None) -> int:
        """A Run that died mid-session: recorded running, its Lease long expired, the issue
        labelled in-progress by the factory."""
        store = self.world.store
        repository = store.ensure_repository("acme", "widgets")
        run = store.start_run(repository, number, issue_branch=branch, base_branch="main")
        past = self.world.clock.now() - timedelta(hours=2)
        lease = store.acquire_lease(repository, number, "dead:1", timedelta(minutes=10), now=past)
        assert lease is not None
        store.attach_run_to_lease(lease, run.id)
        self.unlabel(number, READY, self.world.github.login)
        self.label(number, BUSY, self.world.github.login)
        return run.id


@pytest.fixture
def dw(world: RunWorld) -> DaemonWorld:
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    return DaemonWorld(world)


def test_each_ready_issue_runs_once_with_one_claim_comment(dw: DaemonWorld) -> None:
    """Three Ready issues: one cycle runs all three, each to a ready pull request with exactly
    one claim comment; the next cycle finds nothing to do."""
    numbers = [dw.ready_issue(f"Widget {n}") for n in range(3)]

    assert dw.daemon.once() == 0

    runs = sorted(dw.world.store.list_runs(), key=lambda run: run.id)
    assert [run.issue_number for run in runs] == numbers
    assert all(run.state == "succeeded" for run in runs)
    assert len(dw.world.github.pull_requests()) == 3
    for number, run in zip(numbers, runs, strict=True):
        [claim] = dw.claim_comments(number)
        assert f"Run {run.id} (daemon d1)" in claim
        assert BUSY in dw.world.github.labels_of(number)
    assert len(dw.lines("pickup")) == 3
    assert len(dw.lines("end")) == 3
    assert sorted(dw.starter.started) == [f"pickup #{number}" for number in numbers]

    assert dw.daemon.once() == 0
    assert len(dw.world.store.list_runs()) == 3


def test_a_readers_label_is_passed_over_once_and_a_maintainers_label_is_taken(
    dw: DaemonWorld,
) -> None:
    """A label added by a reader gives one pass-over line naming them, not one per cycle; the
    same label added again by a maintainer is picked up on the next cycle."""
    number = dw.ready_issue("From a reader", labeller=READER)

    assert dw.daemon.once() == 0
    assert dw.daemon.once() == 0
    [line] = dw.lines("pass-over")
    assert f"{READER} added {READY} with read permission" in line
    assert dw.world.store.list_runs() == []
    assert dw.world.github.comments_on(number) == []

    dw.unlabel(number, READY, MAINTAINER)
    dw.label(number, READY, MAINTAINER)
    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert (run.issue_number, run.state) == (number, "succeeded")


def test_a_label_passed_over_for_permission_is_announced_once_across_polls(
    dw: DaemonWorld,
) -> None:
    """The reader's label gives one message naming the issue and the reason, however many polls
    see it again; a pass-over for another reason (a blocker) gives none."""
    number = dw.ready_issue("From a reader", labeller=READER)
    blocked = dw.ready_issue("Blocked", labeller=MAINTAINER)
    dw.world.github.block(blocked, dw.world.github.add_issue("Blocker"))

    for _ in range(3):
        assert dw.daemon.once() == 0

    [(notice, _body)] = dw.notified.sent
    assert (notice.event, notice.issue_number, notice.state) == (
        "issue.passed_over",
        number,
        "passed-over",
    )
    assert f"{READER} added {READY} with read permission" in (notice.cause or "")
    assert notice.issue_url.endswith(f"/issues/{number}")


def test_a_pass_over_announced_once_is_not_announced_again_when_its_reason_flips_back(
    world: RunWorld,
) -> None:
    """The reader's label is announced; a Harness pause then passes the issue over for another
    reason, and when the pause ends the reader's reason is back: no second message. Taken off
    and labelled again, it is news again."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    pause: list[str | None] = [None]
    dw = DaemonWorld(world, paused=lambda: pause[0])
    number = dw.ready_issue("From a reader", labeller=READER)

    assert dw.daemon.once() == 0
    pause[0] = "claude's provider is overloaded (529); pickups wait"
    assert dw.daemon.once() == 0
    pause[0] = None
    assert dw.daemon.once() == 0

    assert len(dw.notified.sent) == 1
    dw.unlabel(number, READY, MAINTAINER)
    assert dw.daemon.once() == 0
    dw.label(number, READY, READER)
    assert dw.daemon.once() == 0
    assert len(dw.notified.sent) == 2


def test_a_repository_whose_daily_budget_is_spent_is_passed_over_and_nothing_is_claimed(
    world: RunWorld,
) -> None:
    """Today's sessions on the repository cost $5 of a $5 daily budget: a Ready issue is passed
    over once, naming the budget, with no Claim, no comment and its label untouched; with the
    spending on another repository, it is taken."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    dw = DaemonWorld(world, daily_budget_usd=5.0)
    store = world.store
    spent = store.start_run(store.ensure_repository("acme", "widgets"), 99)
    row = store.start_session(spent.id, "implement", harness="claude", log_path="/l", prompt="p")
    store.end_session(row.id, state="ended", usage=Usage(cost_usd=5.0, cost_source="reported"))
    number = dw.ready_issue("Widget")

    assert dw.daemon.once() == 0
    assert dw.daemon.once() == 0

    [line] = dw.lines("pass-over")
    assert "the daily cost budget of acme/widgets ($5.00) is spent for today (UTC)" in line
    assert [run.issue_number for run in store.list_runs()] == [99]
    assert world.github.comments_on(number) == []
    assert READY in world.github.labels_of(number)

    moved = store.start_run(store.ensure_repository("acme", "gadgets"), 1000)
    with sqlite3.connect(world.settings.home / "thirdshift.db") as db:
        db.execute("UPDATE sessions SET run_id = ? WHERE id = ?", (moved.id, row.id))
    assert dw.daemon.once() == 0
    assert [
        (run.issue_number, run.state) for run in store.list_runs() if run.issue_number == number
    ] == [(number, "succeeded")]


def test_a_blocked_issue_is_taken_on_the_first_poll_after_its_blocker_closes(
    dw: DaemonWorld,
) -> None:
    gh = dw.world.github
    blocker = gh.add_issue("Groundwork")
    blocked = dw.ready_issue("Build on it")
    gh.world.add_blocked_by(
        gh.repo_state, gh.repo_state.issue(blocked), gh.repo_state.issue(blocker).id, MAINTAINER
    )

    assert dw.daemon.once() == 0
    assert dw.world.store.list_runs() == []
    assert f"blocked by #{blocker}, still open" in dw.lines("pass-over")[0]

    dw.close(blocker)
    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert run.issue_number == blocked


def test_excluded_labels_wait_and_a_fresh_issue_waits_until_it_settles(world: RunWorld) -> None:
    """An excluded label passes an issue over; an issue is taken only once unchanged for the
    settle time, and an edit starts the wait again."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    dw = DaemonWorld(world, settle_seconds=60)
    triage = dw.ready_issue("Needs a look")
    dw.label(triage, "needs-triage", MAINTAINER)
    fresh = dw.ready_issue("Just written")
    gh = dw.world.github
    gh.repo_state.issue(fresh).updated_at = dw.poll_clock.now()

    assert dw.daemon.once() == 0
    dw.poll_clock.advance(45)
    gh.repo_state.issue(fresh).updated_at = dw.poll_clock.now()  # edited now
    assert dw.daemon.once() == 0
    dw.poll_clock.advance(30)  # 75 s since it was written, 30 s since the edit
    assert dw.daemon.once() == 0
    assert dw.world.store.list_runs() == []
    reasons = [(a.issue_number, a.message) for a in dw.world.store.activity()]
    assert any(n == triage and "needs-triage" in m for n, m in reasons)
    settling = "passed over: it changed recently; it is taken once unchanged for 60s"
    assert reasons.count((fresh, settling)) == 1  # one line, not one per poll

    dw.poll_clock.advance(30)
    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert run.issue_number == fresh


def test_a_daemon_that_sees_an_issue_once_settles_it_by_github_s_stamp(world: RunWorld) -> None:
    """`--once` from cron sees each issue only once: an issue GitHub last changed long ago is
    settled on that first look, one changed a minute ago is not."""
    dw = DaemonWorld(world, settle_seconds=600)
    old = dw.ready_issue("Written yesterday")
    new = dw.ready_issue("Written a minute ago")
    issues = world.github.repo_state.issues
    issues[old].updated_at = dw.poll_clock.now() - timedelta(days=1)
    issues[new].updated_at = dw.poll_clock.now() - timedelta(minutes=1)

    assert [pickup.number for pickup in dw.poll()] == [old]


def test_a_failure_is_not_run_again_until_a_person_adds_the_label_again(
    dw: DaemonWorld,
) -> None:
    """A Run that fails leaving nothing does not give ready-for-agent back, so the daemon does
    not run it again on every poll; it does once a person adds the label again."""
    number = dw.ready_issue("Always fails")
    dw.world.sessions.plays["implement"] = lambda worktree, prompt: "did nothing"

    assert dw.daemon.once() == 1
    assert dw.world.github.labels_of(number) == []
    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert run.state == "failed"

    dw.label(number, READY, MAINTAINER)
    assert dw.daemon.once() == 1
    assert len(dw.world.store.list_runs()) == 2


def test_a_run_whose_providers_are_all_down_gives_the_issue_back_to_ready(
    dw: DaemonWorld,
) -> None:
    """Every model provider down after the CLIs' retries is not the work's failure: a Run that
    left nothing gives ready-for-agent back, so the issue is taken again once a provider is
    back (the daemon's pause keeps it from being taken at once)."""
    number = dw.ready_issue("Provider down")

    def down(worktree: Path, prompt: str) -> str:
        outage = ProviderOutage("claude", 529, "claude's turn failed: API error 529", None)
        raise ProviderUnavailable(outage.cause, outage)

    dw.world.sessions.plays["implement"] = down

    assert dw.daemon.once() == 1
    assert READY in dw.world.github.labels_of(number)
    assert BUSY not in dw.world.github.labels_of(number)
    [failure] = [body for body in dw.world.github.comments_on(number) if CLAIM_MARKER not in body]
    assert "529" in failure
    assert "To run it again" not in failure


def test_a_crashed_run_is_recorded_and_rescued_from_what_reached_origin(dw: DaemonWorld) -> None:
    """A Run died mid-session after pushing issue-1: the reaper records the crash, the poll
    starts a Rescue with the next fencing token, and it finishes on the same branch with one
    pull request and one claim comment."""
    number = dw.ready_issue("Half done")
    dw.world.push_branch("issue-1", "half.txt")
    dead = dw.crashed_run(number, branch="issue-1")

    assert dw.daemon.once() == 0

    crashed = dw.world.store.get_run(dead)
    assert crashed is not None
    assert crashed.state == "crashed"
    rescue = dw.world.store.latest_run(crashed.repository, number)
    assert rescue is not None
    assert rescue.id != dead
    assert rescue.state == "succeeded"
    assert dw.world.origin_file("issue-1", "half.txt") == "half.txt"
    assert dw.world.origin_file("issue-1", "widget.txt") == "widget"
    [pull] = dw.world.github.pull_requests()
    assert pull.head_ref == "issue-1"
    [claim] = dw.claim_comments(number)
    assert f"as a Rescue of Run {dead}, which crashed" in claim
    lease = dw.world.store.lease_of(crashed.repository, number)
    assert lease is None  # released at the end, after token 2 did the work
    assert any(f"Run {dead} ended by a crash" in line for line in dw.lines("crash"))
    assert dw.lines("rescue") == [f"Run {dead} crashed; starting a Rescue that continues its work"]
    assert dw.starter.started == [f"rescue #{number}"]
    assert "stopped without recording how it ended" in dw.world.sessions.prompts["implement"]


def test_a_rescue_waits_while_the_repository_s_daily_budget_is_spent(world: RunWorld) -> None:
    """The crash is recorded, but the Rescue would fail at its first session and leave its
    issue without a label: it is passed over, naming the budget, and no Run starts."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    dw = DaemonWorld(world, daily_budget_usd=1.0)
    number = dw.ready_issue("Half done")
    world.push_branch("issue-1", "half.txt")
    dead = dw.crashed_run(number, branch="issue-1")
    row = world.store.start_session(dead, "implement", harness="claude", log_path="/l", prompt="p")
    world.store.end_session(row.id, state="ended", usage=Usage(cost_usd=1.5))

    assert dw.daemon.once() == 0

    crashed = world.store.get_run(dead)
    assert crashed is not None
    assert crashed.state == "crashed"
    assert [run.id for run in world.store.list_runs()] == [dead]
    [line] = dw.lines("pass-over")
    assert "the daily cost budget of acme/widgets ($1.00) is spent" in line
    assert dw.lines("rescue") == []


def test_a_rescue_pushes_what_the_crashed_runs_worktree_kept(dw: DaemonWorld) -> None:
    """The crashed Run's Worktree holds a commit that never reached origin, at the head its
    session's end recorded, and uncommitted work: the Rescue commits and pushes it first, and
    builds on it."""
    number = dw.ready_issue("Kept work")
    ref = IssueRef("github.test", "acme", "widgets", number)
    clone = dw.world.clone_of(ref, dw.world.github.repo("acme", "widgets"))
    clone.sync()
    path = dw.world.settings.home / "worktrees" / "acme-widgets-issue-1"
    kept = clone.add_worktree(path, "issue-1", "refs/remotes/origin/main")
    (path / "kept.txt").write_text("kept\n")
    git(path, "add", "kept.txt")
    git(path, "commit", "-q", "-m", "Work that never reached origin")
    (path / "loose.txt").write_text("uncommitted\n")
    assert kept.is_dirty()
    dead = dw.crashed_run(number, branch="issue-1")
    dw.world.store.record_branch_head(dead, kept.head())

    assert dw.daemon.once() == 0

    log = dw.world.origin_log("issue-1")
    assert "Work that never reached origin" in log
    assert "thirdshift: work an earlier Run left in its Worktree" in log
    assert dw.world.origin_file("issue-1", "loose.txt") == "uncommitted"
    assert len(dw.world.github.pull_requests()) == 1


def test_a_rescue_sets_aside_commits_no_head_of_the_crashed_run_recorded(dw: DaemonWorld) -> None:
    """The crashed Run died mid-session: the commit in its Worktree was never recorded, so the
    Rescue keeps it aside (in the Worktree's repository) with the uncommitted work, pushes none
    of it, and starts from origin."""
    number = dw.ready_issue("Kept work")
    ref = IssueRef("github.test", "acme", "widgets", number)
    clone = dw.world.clone_of(ref, dw.world.github.repo("acme", "widgets"))
    clone.sync()
    path = dw.world.settings.home / "worktrees" / "acme-widgets-issue-1"
    clone.add_worktree(path, "issue-1", "refs/remotes/origin/main")
    (path / "kept.txt").write_text("kept\n")
    git(path, "add", "kept.txt")
    git(path, "commit", "-q", "-m", "Work no head recorded")
    (path / "loose.txt").write_text("uncommitted\n")
    dw.crashed_run(number, branch="issue-1")

    assert dw.daemon.once() == 0

    assert dw.world.origin_log("issue-1") == ["Add the widget", "Initial commit"]
    own = own_git_dir(path)
    [aside] = git(own, "for-each-ref", "--format=%(refname)", UNADOPTED).splitlines()
    unknown = git(own, "rev-parse", f"{aside}^")
    assert aside == f"{UNADOPTED}/issue-1-{unknown[:12]}"
    assert any("not adopting issue-1 in the worktree" in line for line in dw.world.lines)
    kept = git(own, "log", "--format=%s", aside).splitlines()
    assert kept[:2] == [
        "thirdshift: uncommitted work of a Worktree that was not adopted",
        "Work no head recorded",
    ]
    assert git(own, "show", f"{aside}:loose.txt") == "uncommitted"


def test_a_crashed_run_that_left_nothing_gives_the_issue_back_to_ready(dw: DaemonWorld) -> None:
    """Killed right after its Claim, nothing on origin: the issue gets ready-for-agent back in
    place of in-progress, and is then picked up like any Ready issue."""
    number = dw.ready_issue("Claimed and lost")
    dead = dw.crashed_run(number, branch="issue-1")

    assert dw.daemon.once() == 0

    assert any("crashed before anything reached origin" in line for line in dw.lines("sweep"))
    latest = dw.world.store.latest_run(dw.world.store.ensure_repository("acme", "widgets"), number)
    assert latest is not None
    assert latest.id != dead
    assert latest.state == "succeeded"
    assert len(dw.world.github.pull_requests()) == 1


def test_in_progress_is_swept_off_a_closed_issue_a_run_worked_on(dw: DaemonWorld) -> None:
    """A Run left its pull request ready and a person merged it (closing the issue): the next
    poll takes in-progress off. A person's own in-progress on an issue no Run touched stays."""
    number = dw.world.github.add_issue("Done and merged")
    dw.label(number, BUSY, dw.world.github.login)
    store = dw.world.store
    run = store.start_run(store.ensure_repository("acme", "widgets"), number)
    store.finish_run(run.id, RunState.SUCCEEDED)
    dw.close(number)
    theirs = dw.world.github.add_issue("A person's own work")
    dw.label(theirs, BUSY, MAINTAINER)
    dw.close(theirs)

    assert dw.daemon.once() == 0

    assert BUSY not in dw.world.github.labels_of(number)
    assert dw.world.github.labels_of(theirs) == [BUSY]
    assert dw.lines("sweep") == [f"took {BUSY} off the closed issue"]


def test_a_sweep_never_writes_over_a_run_that_took_the_issue_after_the_poll_looked(
    dw: DaemonWorld,
) -> None:
    """A crashed Run left nothing; right after the poll looked, another daemon's Run takes the
    issue's Lease. The sweep, which would give the Ready label back, writes nothing."""
    number = dw.ready_issue("Raced")
    dw.crashed_run(number, branch="issue-1")
    store = dw.world.store
    repository = store.ensure_repository("acme", "widgets")

    def another_daemon_claims(method: str) -> None:
        if method == "branch_exists":
            assert store.acquire_lease(repository, number, "d2:run", timedelta(hours=3))

    dw.world.github.on_call = another_daemon_claims

    assert dw.poll() == []

    assert dw.world.github.labels_of(number) == [BUSY]
    assert dw.lines("sweep") == []
    assert dw.world.github.called("add_label") == []


def test_a_sweep_writes_nothing_once_a_newer_run_was_recorded(dw: DaemonWorld) -> None:
    """A crashed Run left nothing; before the sweep gives the label back, another daemon's Run
    on the issue started and ended. The sweep, under the free Lease, sees a newer Run than
    the one it judged, and writes nothing."""
    number = dw.ready_issue("Raced again")
    dw.crashed_run(number, branch="issue-1")
    store = dw.world.store
    repository = store.ensure_repository("acme", "widgets")

    def another_run_came_and_went(method: str) -> None:
        if method == "branch_exists":
            newer = store.start_run(repository, number)
            store.finish_run(newer.id, RunState.FAILED, cause="something else")

    dw.world.github.on_call = another_run_came_and_went

    assert dw.poll() == []

    assert dw.world.github.labels_of(number) == [BUSY]
    assert dw.world.github.called("add_label") == []


def test_an_issue_no_longer_ready_under_the_lease_is_not_claimed(dw: DaemonWorld) -> None:
    """Between the poll and the Lease another daemon ran the issue: the Run ends with exit 3
    having recorded, labelled and posted nothing."""
    number = dw.world.github.add_issue("Taken meanwhile")
    dw.label(number, BUSY, MAINTAINER)
    ref = IssueRef("github.test", "acme", "widgets", number)

    status = dw.pick_up(RunRequest(issue=ref, expect_ready=True), print).exit_code

    assert status == 3
    assert dw.world.store.list_runs() == []
    assert dw.world.github.comments_on(number) == []
    assert dw.world.github.labels_of(number) == [BUSY]


def test_a_run_sharing_no_database_backs_off_when_another_took_the_ready_label_first(
    dw: DaemonWorld,
) -> None:
    """Two Runs with databases of their own (a workflow, a daemon on another machine) both hold
    a Lease. Right before this one takes the Ready label off, the other takes it: GitHub tells
    this one the label is gone, and it ends Not claimed, having recorded, labelled and posted
    nothing."""
    number = dw.ready_issue("Raced across machines")
    ref = IssueRef("github.test", "acme", "widgets", number)
    github = dw.world.github

    def the_other_machine_claims(method: str) -> None:
        if method == "take_label":
            github.on_call = None
            github.unlabel_issue(number, READY, by="other-machine")
            github.label_issue(number, BUSY, by="other-machine")

    github.on_call = the_other_machine_claims
    said: list[str] = []

    status = dw.pick_up(RunRequest(issue=ref, expect_ready=True), said.append).exit_code

    assert status == 3
    assert dw.world.store.list_runs() == []
    assert github.comments_on(number) == []
    assert github.labels_of(number) == [BUSY]
    assert github.called("add_label") == []
    assert any("was claimed on GitHub by another Run first" in line for line in said), said


def test_the_ready_label_is_taken_off_before_the_run_is_recorded_or_anything_else_changes(
    dw: DaemonWorld,
) -> None:
    """The Claim on GitHub begins with the decisive step: the Ready label comes off before the
    Run's record, the in-progress label or the claim comment; the Run then goes on as ever."""
    number = dw.ready_issue("In order")
    ref = IssueRef("github.test", "acme", "widgets", number)
    seen: list[tuple[str, int]] = []
    github = dw.world.github
    github.on_call = lambda method: seen.append((method, len(dw.world.store.list_runs())))

    status = dw.pick_up(RunRequest(issue=ref, expect_ready=True), print).exit_code

    assert status == 0, dw.world.lines
    writes = [
        (m, runs)
        for m, runs in seen
        if m in ("take_label", "add_label", "remove_label", "upsert_marked_comment")
    ]
    assert writes[0] == ("take_label", 0)
    assert github.called("remove_label") == []
    assert github.labels_of(number) == [BUSY]


def test_a_claim_github_cannot_finish_gives_the_ready_label_back(dw: DaemonWorld) -> None:
    """The Ready label came off, then GitHub fails to add in-progress: the issue gets its
    Ready label back, nothing is recorded, and the next poll can take it."""
    number = dw.ready_issue("Flaky labels")
    ref = IssueRef("github.test", "acme", "widgets", number)
    github = dw.world.github
    github.faults["add_label"].append(GitHubError("GitHub answered 502 five times", 502))
    said: list[str] = []

    status = dw.pick_up(RunRequest(issue=ref, expect_ready=True), said.append).exit_code

    assert status == 1
    assert github.labels_of(number) == [READY]
    assert dw.world.store.list_runs() == []
    assert any("GitHub answered 502 five times" in line for line in said)


def test_a_run_the_database_cannot_record_gives_the_ready_label_back(dw: DaemonWorld) -> None:
    """Both labels were swapped, then the database refuses to record the Run (its table is
    gone for a moment): Ready comes back and in-progress goes, so the issue is never left
    with neither label and no Run."""
    number = dw.ready_issue("Flaky database")
    ref = IssueRef("github.test", "acme", "widgets", number)
    database = sqlite3.connect(dw.world.settings.home / "thirdshift.db")

    def the_database_breaks(method: str) -> None:
        if method == "add_label" and dw.world.github.labels_of(number) == []:
            database.execute("ALTER TABLE runs RENAME TO runs_away")
            database.commit()

    dw.world.github.on_call = the_database_breaks
    try:
        status = dw.pick_up(RunRequest(issue=ref, expect_ready=True), print).exit_code
    finally:
        dw.world.github.on_call = None
        database.execute("ALTER TABLE runs_away RENAME TO runs")
        database.commit()
        database.close()

    assert status == 1
    assert dw.world.github.labels_of(number) == [READY]


def test_a_run_that_died_after_its_claim_and_before_its_record_gives_the_issue_back(
    dw: DaemonWorld,
) -> None:
    """kill -9 between the label swap and the Run's record: in-progress, no Run, a Lease that
    ran out unreleased. The next poll puts the Ready label back for whoever polls first."""
    number = dw.ready_issue("Orphaned claim")
    store = dw.world.store
    repository = store.ensure_repository("acme", "widgets")
    past = dw.world.clock.now() - timedelta(hours=2)
    assert store.acquire_lease(repository, number, "d2:dead", timedelta(minutes=10), now=past)
    dw.world.github.unlabel_issue(number, READY, by=dw.world.github.login)
    dw.world.github.label_issue(number, BUSY, by=dw.world.github.login)

    dw.poll()

    assert dw.world.github.labels_of(number) == [READY]
    assert any("died after claiming the issue" in line for line in dw.lines("sweep"))


class _ListedPoll:
    """A repository whose poll always proposes the same issues (the limits are the subject)."""

    def __init__(self, store: Store, owner: str, name: str, numbers: list[int]) -> None:
        self.owner, self.name, self._store, self._numbers = owner, name, store, numbers

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def repository(self) -> Repository:
        return self._store.ensure_repository(self.owner, self.name)

    def reap(self) -> None:
        pass

    def settles_in(self, _now: float) -> float | None:
        return None  # nothing here waits for a settle time

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        return [Pickup(number) for number in self._numbers]


def test_runs_go_side_by_side_within_both_limits(world: RunWorld) -> None:
    """Three repositories with three issues each, at most three Runs at once and two per
    repository: never more than that, and every issue runs."""
    lock = threading.Lock()
    running: list[str] = []
    most = {"all": 0, "per repository": 0}
    full = threading.Event()  # three ran at once: the limits allow it, so the daemon must

    def start_run(request: RunRequest, *_: object) -> RunOutcome:
        key = request.issue.full_name
        with lock:
            running.append(key)
            most["all"] = max(most["all"], len(running))
            most["per repository"] = max(most["per repository"], running.count(key))
            if len(running) == 3:
                full.set()
        # The first Runs wait for the others the limits allow beside them (however slow this
        # machine is), not a fixed moment that a loaded machine may miss.
        full.wait(10)
        with lock:
            running.remove(key)
        return RunOutcome(RunEnd.READY, 0)

    dw = DaemonWorld(world, max_runs=3, max_runs_per_repository=2, start_run=start_run)
    dw.daemon = dw.daemon_of(dw.starter, max_runs=3)
    for name in ("widgets", "gadgets", "gizmos"):
        dw.daemon.watch(cast(RepositoryPoll, _ListedPoll(world.store, "acme", name, [1, 2, 3])))

    assert dw.daemon.once() == 0
    assert most == {"all": 3, "per repository": 2}
    assert len(dw.lines("end")) == 9


class _SlowPoll(_ListedPoll):
    """A poll still running when the daemon is told to stop: it ends only after the stop."""

    def __init__(self, store: Store, stop: threading.Event, started: threading.Event) -> None:
        super().__init__(store, "acme", "widgets", [])
        self._stop, self._started = stop, started

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        self._started.set()
        self._stop.wait(30)
        time.sleep(1.5)  # the daemon is inside its shutdown by now
        return []


def test_a_daemon_stopped_while_a_poll_runs_waits_for_it_and_exits(world: RunWorld) -> None:
    """SIGTERM lands while a poll is still asking GitHub: the poll ends, publishes what it saw,
    and the daemon returns. (The poll's publishing once asked the scheduler while its
    shutdown held the scheduler's lock waiting for that very poll: neither ever went on.)"""
    dw = DaemonWorld(world)
    started = threading.Event()
    published: list[object] = []
    dw.daemon = dw.daemon_of(
        ScriptedStarter(lambda _request, _watch: RunOutcome(RunEnd.READY, 0)),
        max_runs=1,
        stop_seconds=5,
        shown=StateSources(publish=published.append),
    )
    dw.daemon.watch(cast(RepositoryPoll, _SlowPoll(world.store, dw.stop, started)))
    served: list[int] = []
    serving = threading.Thread(target=lambda: served.append(dw.daemon.serve()), daemon=True)
    serving.start()
    assert started.wait(30)

    dw.stop.set()
    serving.join(timeout=30)

    assert not serving.is_alive(), "the daemon never returned"
    assert served == [0]


def test_a_poll_that_fails_is_logged_and_tried_again_next_cycle(dw: DaemonWorld) -> None:
    number = dw.ready_issue("After the outage")
    dw.world.github.fail_next("issues_labelled", GitHubError("GitHub answered 502", 502))

    assert dw.daemon.once() == 1
    [line] = dw.lines("poll")
    assert "tried again next cycle: GitHub answered 502" in line
    assert dw.world.store.list_runs() == []

    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert run.issue_number == number


def test_an_issue_closed_during_its_run_stops_that_run(dw: DaemonWorld) -> None:
    """Someone closes the issue while its session works: the next poll stops the Run, which
    saves its work and records why."""
    number = dw.ready_issue("Closed midway")

    def closes_then_polls(worktree: Path, prompt: str) -> str:
        commit_file("widget.txt", "widget\n", "Add the widget")(worktree, prompt)
        dw.close(number)
        dw.daemon._poll(dw.poll)
        return "done"

    dw.world.sessions.plays["implement"] = closes_then_polls

    assert dw.daemon.once() == 1

    [run] = dw.world.store.list_runs()
    assert run.state == "failed"
    assert run.cause is not None
    assert "the issue was closed during the Run" in run.cause
    assert "Add the widget" in dw.world.origin_log("issue-1")
    assert any("the issue was closed during the Run" in line for line in dw.lines("stop"))


def test_pickups_wait_while_the_harness_provider_is_down_and_resume_after_its_reset(
    world: RunWorld,
) -> None:
    """A Run found claude's provider rate-limited until a reset ten minutes off, no fallback:
    a Ready issue is passed over once with the reason, nothing is claimed; after the reset it
    is taken."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    clock = ManualClock(datetime.now(UTC))
    pauses = ProviderPauses(clock, default_seconds=300)
    dw = DaemonWorld(world, paused=lambda: pauses.pass_over_reason("claude", []))
    pauses.pause(
        ProviderOutage("claude", 429, "claude's turn failed", clock.now() + timedelta(minutes=10))
    )
    number = dw.ready_issue("While the provider is down")

    assert dw.daemon.once() == 0
    assert dw.daemon.once() == 0
    [line] = dw.lines("pass-over")
    assert "claude's provider is rate-limited (429); pickups wait until" in line
    assert dw.world.store.list_runs() == []
    assert dw.world.github.comments_on(number) == []

    clock.advance(600)
    assert dw.daemon.once() == 0
    [run] = dw.world.store.list_runs()
    assert (run.issue_number, run.state) == (number, "succeeded")


def test_the_reaper_ends_the_sessions_of_a_crashed_run(dw: DaemonWorld) -> None:
    """A Run that died mid-session leaves no session recorded running: the crash ends it."""
    number = dw.ready_issue("Died mid-session")
    dead = dw.crashed_run(number, branch=None)
    store = dw.world.store
    store.start_session(dead, "implement", harness="scripted", log_path="/l", prompt="p")

    dw.poll.reap()

    [session] = store.run_sessions(dead)
    assert session.state == "failed"
    assert session.error == "its Run crashed before the session's end was recorded"


def crashed_after_its_turn(dw: DaemonWorld) -> tuple[int, int, Path]:
    """A Ready issue whose Run crashed after its implement session committed in the Worktree
    and wrote its result to its Session log, before the session's end was recorded: the
    issue's number, the dead Run and its kept Worktree."""
    number = dw.ready_issue("Done, then died")
    ref = IssueRef("github.test", "acme", "widgets", number)
    clone = dw.world.clone_of(ref, dw.world.github.repo("acme", "widgets"))
    clone.sync()
    path = dw.world.settings.home / "worktrees" / "acme-widgets-issue-1"
    clone.add_worktree(path, "issue-1", "refs/remotes/origin/main")
    (path / "widget.txt").write_text("widget\n")
    git(path, "add", "widget.txt")
    git(path, "commit", "-q", "-m", "Add the widget")
    dead = dw.crashed_run(number, branch="issue-1")
    log = dw.world.root / "crashed-implement.jsonl"
    log.write_text('{"type": "scripted"}\n{"type": "result", "message": "done"}\n')
    dw.world.store.start_session(
        dead, "implement", harness="scripted", log_path=str(log), prompt="p"
    )
    return number, dead, path


def test_a_rescue_does_not_open_again_a_session_that_had_ended_its_turn(dw: DaemonWorld) -> None:
    """The crashed Run's implement session wrote its result to its Session log and committed
    its work in the Worktree, whose head thirdshift recorded, then the process died before
    recording the session's end: the Rescue pushes the kept work and opens its pull request
    without paying for the turn again."""
    number, dead, path = crashed_after_its_turn(dw)
    dw.world.store.record_branch_head(dead, git(path, "rev-parse", "HEAD").strip())
    del dw.world.sessions.plays["implement"]  # opening it again fails the Rescue

    assert dw.daemon.once() == 0

    rescue = dw.world.store.latest_run(dw.world.store.ensure_repository("acme", "widgets"), number)
    assert rescue is not None
    assert rescue.id != dead
    assert rescue.state == "succeeded"
    assert dw.world.store.run_sessions(rescue.id) == []
    assert dw.world.origin_file("issue-1", "widget.txt") == "widget"
    assert len(dw.world.github.pull_requests()) == 1


def test_a_rescue_takes_the_turn_again_when_the_kept_work_was_set_aside(
    dw: DaemonWorld,
) -> None:
    """The same crash, but the kept head is none thirdshift recorded (a session that died
    mid-way moved it): the work is kept aside, never pushed, and the turn is taken again."""
    number, dead, path = crashed_after_its_turn(dw)

    dw.world.sessions.plays["implement"] = commit_file(
        "gadget.txt", "gadget\n", "Add the gadget", pull_request=PR_TEXT
    )

    assert dw.daemon.once() == 0, "\n".join(dw.world.lines)

    rescue = dw.world.store.latest_run(dw.world.store.ensure_repository("acme", "widgets"), number)
    assert rescue is not None
    assert rescue.id != dead
    assert rescue.state == "succeeded"
    assert [session.kind for session in dw.world.store.run_sessions(rescue.id)] == ["implement"]
    assert dw.world.origin_file("issue-1", "gadget.txt") == "gadget"
    assert "refs/thirdshift/unadopted/issue-1-" in git(
        own_git_dir(path), "for-each-ref", "--format=%(refname)"
    )
