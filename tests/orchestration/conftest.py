"""The orchestration world: a Run's real ``Delivery`` against the GitHub fake, a bare origin on
disk with real git, a real SQLite store, scripted sessions and a manual clock. No network, no
agent CLI, no sleeping: each test takes a fraction of a second."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_github import FakeGitHub, bare_origin
from tests.support.scripted_sessions import ScriptedSessions, git
from thirdshift import bootstrap
from thirdshift.clock import ManualClock
from thirdshift.daemon import (
    ActivityLog,
    PollHooks,
    PollParts,
    ReadyRules,
    RepositoryPoll,
    RunWatch,
)
from thirdshift.git import CommitIdentity, ManagedClone
from thirdshift.issue_url import IssueRef, RunRef
from thirdshift.notify import ScriptedTarget, Target, TargetNotifier
from thirdshift.records import RepoInfo
from thirdshift.runs import Delivery, RunOutcome, RunRequest
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.runs.ports import NO_NOTIFIER
from thirdshift.runs.scope import RunHooks, RunParts
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store

READY = "ready-for-agent"
BUSY = "in-progress"
PR_TEXT = "Add the widget\n\nIt adds the widget the issue asks for."
PLANTED_TOKEN = "ghp_orchestrationPlantedToken0123456789AB"


@dataclass
class RunWorld:
    root: Path
    origin: Path
    github: FakeGitHub
    store: Store
    sessions: ScriptedSessions
    clock: ManualClock
    settings: Settings
    interrupt: threading.Event = field(default_factory=threading.Event)
    lines: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    """Notification targets (none: the Run has no Notifier, as when nothing is configured)."""

    def notify_to(self, name: str = "scripted") -> ScriptedTarget:
        """A scripted notification target the Runs of this world announce their ends to."""
        target = ScriptedTarget(name)
        self.targets.append(target)
        return target

    @property
    def environ(self) -> dict[str, str]:
        return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"}

    def clone_of(self, ref: RunRef, repo: RepoInfo) -> ManagedClone:
        return ManagedClone(
            self.settings.home,
            ref.owner,
            ref.repo,
            repo.clone_url,
            None,
            CommitIdentity(self.settings.git_user_name, self.settings.git_user_email),
            scrub=Scrubber([PLANTED_TOKEN]),
            environ=self.environ,
            timeout=60,
        )

    def parts(self, **settings: Any) -> RunParts:
        """The Run's parts as the composition root takes them: the fake, scripted sessions,
        bare repositories on disk."""
        return RunParts(
            settings=self.settings.model_copy(update=settings) if settings else self.settings,
            github=self.github,
            store=self.store,
            session_source=self.sessions,
            clones=self.clone_of,
            environ=self.environ,
            scrub=Scrubber([PLANTED_TOKEN]),
            clock=self.clock,
        )

    def hooks(self, **hooks: Any) -> RunHooks:
        scrub = Scrubber([PLANTED_TOKEN])
        fields: dict[str, Any] = {
            "progress": self.lines.append,
            "interrupt": self.interrupt,
            "emit_url": self.urls.append,
            "notifier": (
                TargetNotifier(self.targets, scrub=scrub, progress=self.lines.append)
                if self.targets
                else NO_NOTIFIER
            ),
        }
        return RunHooks(**{**fields, **hooks})

    def delivery(self) -> Delivery:
        return bootstrap.delivery(self.parts(), self.hooks())

    def run(self, number: int, *, merge: bool = False) -> int:
        ref = IssueRef("github.test", "acme", "widgets", number)
        return self.delivery().run(RunRequest(issue=ref, merge=merge)).exit_code

    def push_branch(self, branch: str, name: str) -> None:
        """A branch on origin with one commit of its own, as an earlier Run would leave it."""
        work = self.root / f"push-{branch}"
        git(self.root, "clone", "-q", str(self.origin), str(work))
        git(work, "checkout", "-q", "-b", branch)
        (work / name).write_text(f"{name}\n")
        git(work, "add", name)
        git(work, "commit", "-q", "-m", f"Add {name}")
        git(work, "push", "-q", "origin", branch)

    def take_lease_over(self, number: int | None) -> None:
        """Another Run takes the issue's Lease, as it would once this one's expired while it
        was paused."""
        repository = self.store.ensure_repository("acme", "widgets")
        later = self.clock.now() + timedelta(hours=1)
        taken = self.store.acquire_lease(
            repository, number, "successor", timedelta(hours=1), now=later
        )
        assert taken is not None

    def failure_comments(self, number: int) -> list[str]:
        """The issue's comments but the Claim's own (posted by every Run that claims)."""
        return [c for c in self.github.comments_on(number) if CLAIM_MARKER not in c]

    def origin_log(self, branch: str) -> list[str]:
        return git(self.origin, "log", "--format=%s", branch).splitlines()

    def origin_file(self, branch: str, path: str) -> str:
        return git(self.origin, "show", f"{branch}:{path}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RunWorld]:
    origin = bare_origin(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    interrupt = threading.Event()
    clock = ManualClock(interrupt=interrupt)
    shutil.copyfile(_migrated_database(), home / "thirdshift.db")
    store = Store.open(f"sqlite:///{home / 'thirdshift.db'}", clock=clock)
    settings = Settings(
        home=home,
        github_api_url="https://github.test/api/v3",
        ci_grace_seconds=60,
        ci_poll_seconds=10,
        lease_seconds=600,
    )
    try:
        yield RunWorld(
            root=tmp_path,
            origin=origin,
            github=FakeGitHub(origin),
            store=store,
            sessions=ScriptedSessions(logs_dir=home / "logs", store=store),
            clock=clock,
            settings=settings,
            interrupt=interrupt,
        )
    finally:
        store.close()


@functools.cache
def _migrated_database() -> Path:
    """A new database at the newest migration, made once per test process and copied for each
    world: the migrations are the store's contract tests' (a fifth of a second each)."""
    made = Path(tempfile.mkdtemp(prefix="thirdshift-db-"))
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    Store.open(f"sqlite:///{made / 'thirdshift.db'}").close()
    return made / "thirdshift.db"


def a_poll(world: RunWorld, clock: ManualClock | None = None) -> RepositoryPoll:
    """A daemon's poll of acme/widgets against this world's GitHub and database, as the daemon
    builds it (no Run of this process holds an issue)."""
    when = clock or world.clock
    activity = ActivityLog(
        world.store,
        daemon="d1",
        directory=world.settings.home / "activity",
        clock=when,
        scrub=Scrubber([PLANTED_TOKEN]),
        progress=world.lines.append,
    )
    rules = ReadyRules.of(
        ready_label=READY, in_progress_label=BUSY, excluded_labels=[], settle_seconds=0
    )
    return RepositoryPoll(
        "acme",
        "widgets",
        world.github,
        PollParts(store=world.store, rules=rules, activity=activity, clock=when),
        NOTHING_HERE,
    )


NOTHING_HERE = PollHooks(
    running_here=lambda _n: False,
    stop_here=lambda _n, _why: None,
    kept_worktree=lambda _b: False,
)
"""A poll's hooks when its daemon runs nothing and its host keeps no Worktree."""


def _no_architect_run(owner: str, name: str, _watch: RunWatch) -> RunOutcome:
    raise AssertionError(f"this test starts no Architect run (asked for {owner}/{name})")


@dataclass
class ScriptedStarter:
    """The daemon's ``RunStarter`` in these tests: a pickup's or a Rescue's Run is ``runs``, an
    Architect run ``architects``; ``started`` lists what the daemon asked for, in order
    (``pickup #3``, ``rescue #3``, ``architect acme/widgets``)."""

    runs: Callable[[RunRequest, RunWatch], RunOutcome]
    architects: Callable[[str, str, RunWatch], RunOutcome] = _no_architect_run
    started: list[str] = field(default_factory=list)

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        self.started.append(f"pickup #{request.issue.number}")
        return self.runs(request, watch)

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        self.started.append(f"rescue #{request.issue.number}")
        return self.runs(request, watch)

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        self.started.append(f"architect {owner}/{name}")
        return self.architects(owner, name, watch)
