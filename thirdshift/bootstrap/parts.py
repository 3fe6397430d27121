"""The one factory of a Run's collaborators: from the settings and what its caller gives, the
scrubber, the clock, the GitHub adapter, the Harness's sessions (with the Harnesses a provider
outage switches to), the managed clone and the store, as ``RunParts`` and ``RunHooks``
(``thirdshift.runs.scope``), after the local pre-flight (Harnesses on PATH, the home, the
sandbox)."""

from __future__ import annotations

import os
import pwd
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from thirdshift.bootstrap.bounds import session_limits
from thirdshift.bootstrap.credentials import (
    Credentials,
    GitHubAccess,
    agent_secrets,
    notifier_of,
    run_secrets,
)
from thirdshift.bootstrap.harness_path import with_harness_paths
from thirdshift.clock import Clock, SystemClock
from thirdshift.daemon import ReadyRules
from thirdshift.errors import ThirdshiftError
from thirdshift.git import CommitIdentity, ManagedClone
from thirdshift.github import route_library_log
from thirdshift.harness_registry import harness_entry, harness_not_found
from thirdshift.harnesses import AgentSandbox, Harness, harness_named, probe
from thirdshift.harnesses.egress import socket_root
from thirdshift.harnesses.limits import SessionGroups, probe_groups
from thirdshift.home import Home, check_home
from thirdshift.issue_url import RunRef
from thirdshift.records import ProviderOutage, RepoInfo
from thirdshift.runs import RunHooks, RunParts
from thirdshift.scrub import Scrubber
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.cli_sessions import CliSessions, Fallback, HarnessChoice
from thirdshift.sessions.ledger import Budgets, unpriced_harnesses
from thirdshift.sessions.sealed_space import AgentSeal
from thirdshift.settings import Settings
from thirdshift.store import Store


def hidden_from_agents(settings: Settings, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """What an agent must not see besides thirdshift's home: the user's home (from the
    environment, else the password database), the directory of every session's egress proxy
    socket (a session is given its own alone), the SQLite database's directory, the
    Harnesses' own configuration directories (their transcripts of other work), and a GitHub
    App's private key file."""
    found = [Path(environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir), socket_root()]
    if settings.sqlite_directory is not None:
        found.append(settings.sqlite_directory)
    found += [
        Path(environ[name])
        for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "QWEN_HOME")
        if environ.get(name)
    ]
    # OpenCode keeps every session in XDG_DATA_HOME/opencode (its SQLite database and snapshots),
    # which may lie outside HOME.
    found += [
        Path(environ[name]) / "opencode"
        for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
        if environ.get(name)
    ]
    if settings.github_app_private_key_file is not None:
        found.append(settings.github_app_private_key_file)  # a file: it reads as empty
    return tuple(found)


def agent_sandbox(
    settings: Settings, environ: Mapping[str, str], say: Callable[[str], None]
) -> AgentSandbox:
    """The sandbox every session of this process runs in, with a warning for each seal the
    settings took off (adr/0009, adr/0023)."""
    sandbox = probe(
        environ.get("PATH"),
        unsafe_without=settings.unsafe_agent_without_sandbox,
        unsafe_network=settings.unsafe_agent_network,
    )
    sandbox = replace(sandbox, agent_may_hold_key=settings.unsafe_agent_holds_model_key)
    if settings.unsafe_agent_holds_model_key:
        say(
            "warning: an agent whose login cannot stay outside its sandbox holds it there "
            "(unsafe_agent_holds_model_key)"
        )
    if not sandbox.sealed:
        say("warning: agents run without their sandbox (unsafe_agent_without_sandbox)")
    elif not sandbox.network_sealed:
        say("warning: agents share this host's network (unsafe_agent_network)")
    return sandbox


def session_groups(settings: Settings, say: Callable[[str], None]) -> SessionGroups:
    """Where each session's cgroup is made; SessionLimitsUnavailable naming the fixes when
    this machine offers none, unless the settings opt out (with a warning, adr/0039)."""
    groups = probe_groups(unsafe_unbounded=settings.unsafe_unbounded_sessions)
    if settings.unsafe_unbounded_sessions:
        say("warning: sessions run without a cgroup of their own (unsafe_unbounded_sessions)")
    return groups


def local_preflight(
    settings: Settings, environ: Mapping[str, str], say: Callable[[str], None]
) -> tuple[Home, AgentSandbox, SessionGroups]:
    """The home, checked, the agents' sandbox and their sessions' cgroups: a machine problem
    stops here, before anything on GitHub changes."""
    home = Home(settings.home)
    check_home(home, database_dir=settings.sqlite_directory, min_free_mb=settings.min_free_disk_mb)
    return home, agent_sandbox(settings, environ, say), session_groups(settings, say)


@contextmanager
def opened_store(settings: Settings, given: Store | None = None) -> Iterator[Store]:
    """``given``, or the settings' database, opened here and closed when done."""
    if given is not None:
        yield given
        return
    store = Store.open(settings.effective_database_url)
    try:
        yield store
    finally:
        store.close()


def ready_rules(settings: Settings) -> ReadyRules:
    """The rules a daemon's Poll and an Actions event read a Ready issue by."""
    return ReadyRules.of(
        ready_label=settings.ready_label,
        in_progress_label=settings.in_progress_label,
        excluded_labels=settings.excluded_labels,
        settle_seconds=settings.settle_seconds,
        daily_budget_usd=settings.cost_budget_per_repository_day_usd,
        review_handle=settings.review_handle,
        max_review_repairs=settings.max_review_repairs,
        merge_label=settings.merge_label,
    )


def _no_reason() -> str | None:
    return None


def _nothing(_value: object) -> None:
    return None


@dataclass(frozen=True)
class RunCall:
    """What the caller of a Run gives besides its settings and request. ``environ`` is
    thirdshift's own process environment: its secrets are scrubbed and emptied for git.
    ``agent_environ`` (default: the same) is what the Harness's environment is built from. A
    daemon gives its ``store`` (shared by its Runs), its name as ``claimant``, what says why it
    stopped a Run, what learns the Run's id and what learns of a provider outage."""

    environ: Mapping[str, str]
    progress: Callable[[str], None]
    emit_url: Callable[[str], None]
    interrupt: threading.Event
    claimant: str
    agent_environ: Mapping[str, str] | None = None
    store: Store | None = None
    stopped_because: Callable[[], str | None] = field(default=_no_reason)
    on_recorded: Callable[[int], None] = field(default=_nothing)
    on_outage: Callable[[ProviderOutage], None] = field(default=_nothing)

    @property
    def harness_base(self) -> Mapping[str, str]:
        """What the Harness's environment is built from."""
        return self.environ if self.agent_environ is None else self.agent_environ


@dataclass(frozen=True)
class BuiltRun:
    """A Run kind's parts and hooks, and the ids of the Runs recorded so far (the hooks'
    ``on_recorded`` appends to it)."""

    parts: RunParts
    hooks: RunHooks
    recorded: list[int]


@dataclass(frozen=True)
class _Agents:
    """What a Run's sessions run: the Harness, those a provider outage switches to, the cost
    budgets, the machine (home, sandbox) they run on and who the agent commits as."""

    harness: Harness
    fallbacks: tuple[Fallback, ...]
    budgets: Budgets
    home: Home
    sandbox: AgentSandbox
    identity: CommitIdentity
    groups: SessionGroups


@dataclass(frozen=True)
class _Clones:
    """The managed clone of an issue's repository, acting with the Run's credentials."""

    settings: Settings
    credentials: Credentials
    identity: CommitIdentity
    scrub: Scrubber
    environ: Mapping[str, str]

    def __call__(self, ref: RunRef, repo: RepoInfo) -> ManagedClone:
        return ManagedClone(
            self.settings.home,
            repo.owner,  # GitHub's spelling, whatever the Issue URL's case
            repo.name,
            repo.clone_url,
            self.credentials.token,
            self.identity,
            scrub=self.scrub,
            environ=self.environ,
            credential=self.credentials.words.name,
        )


@contextmanager
def run_parts(settings: Settings, owner: str, name: str, call: RunCall) -> Iterator[BuiltRun]:
    """What a Run kind on ``owner/name`` is built from, after the local pre-flight and before
    anything else; the database is opened (unless ``call`` gives a store) and closed."""
    call = replace(
        call,
        environ=with_harness_paths(call.environ, settings.harness_paths),
        agent_environ=with_harness_paths(call.harness_base, settings.harness_paths),
    )
    scrub = Scrubber.from_environment(
        call.environ, [*run_secrets(settings), *agent_secrets(call.harness_base)]
    )

    def say(line: str) -> None:
        call.progress(scrub(line))

    route_library_log(say)  # a daemon's own lines took them first: they stay there
    identity = CommitIdentity(settings.git_user_name, settings.git_user_email)
    agents = _agents(settings, call, identity, say)
    # Every wait (GitHub's retries and rate limits, CI polls) ends at once on Ctrl-C or SIGTERM.
    clock = SystemClock(call.interrupt)
    access = GitHubAccess(settings, clock, scrub, say)
    credentials = access.credentials(owner, name)
    # The adapter first: it closes the credentials' connection even when the store fails.
    with access.run_adapter(credentials) as github, opened_store(settings, call.store) as store:
        parts = RunParts(
            settings=settings,
            github=github,
            store=store,
            session_source=_sessions(
                settings, agents, store, call, scrub=scrub, clock=clock, say=say
            ),
            clones=_Clones(settings, credentials, agents.identity, scrub, call.environ),
            environ=call.harness_base,
            scrub=scrub,
            clock=clock,
        )
        recorded: list[int] = []

        def recording(run_id: int) -> None:
            recorded.append(run_id)
            call.on_recorded(run_id)

        hooks = RunHooks(
            progress=say,
            interrupt=call.interrupt,
            emit_url=call.emit_url,
            claimant=call.claimant,
            stopped_because=call.stopped_because,
            on_recorded=recording,
            notifier=notifier_of(settings, scrub=scrub, progress=say),
        )
        yield BuiltRun(parts, hooks, recorded)


def _agents(
    settings: Settings, call: RunCall, identity: CommitIdentity, say: Callable[[str], None]
) -> _Agents:
    """The Harnesses and their budgets (each fallback found on PATH, the unpriced ones
    warned of), then the local pre-flight."""
    harness = harness_named(
        settings.harness,
        extra_args=[*settings.harness_args, *settings.harness_options.get(settings.harness, [])],
    )
    fallbacks = _fallbacks(settings, call.environ)
    budgets = Budgets(
        per_run_usd=settings.cost_budget_per_run_usd,
        per_repository_day_usd=settings.cost_budget_per_repository_day_usd,
    )
    for warning in unpriced_harnesses(
        [
            (harness.name, harness.reports_cost, settings.model_for(settings.harness)),
            *((f.harness.name, f.harness.reports_cost, f.model) for f in fallbacks),
        ],
        settings.model_prices,
        budgets,
    ):
        say(warning)
    home, sandbox, groups = local_preflight(settings, call.environ, say)
    return _Agents(harness, fallbacks, budgets, home, sandbox, identity, groups)


def _session_environ(base: Mapping[str, str], identity: CommitIdentity) -> dict[str, str]:
    """The agent commits as the factory: its HOME may hold no git identity at all."""
    return {
        **base,
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
    }


def _fallbacks(settings: Settings, environ: Mapping[str, str]) -> tuple[Fallback, ...]:
    """The Harnesses a provider outage switches to, each with its own options and Model: the
    Run's harness_args and model belong to its own Harness and never cross over."""
    fallbacks = tuple(
        Fallback(
            harness_named(fallback, extra_args=settings.harness_options.get(fallback, [])),
            settings.model_for(fallback),
        )
        for fallback in settings.fallback_harnesses
    )
    for fallback in fallbacks:
        # Found out now, not after the first Harness's provider has failed and its retries ran.
        if shutil.which(fallback.harness.executable, path=environ.get("PATH")) is None:
            raise ThirdshiftError(
                harness_not_found(
                    harness_entry(fallback.harness.name),
                    "a fallback in harness_fallbacks",
                    "take it out of harness_fallbacks",
                )
            )
    return fallbacks


def _sessions(
    settings: Settings,
    agents: _Agents,
    store: Store,
    call: RunCall,
    *,
    scrub: Scrubber,
    clock: Clock,
    say: Callable[[str], None],
) -> CliSessions:
    """The Harness's sessions, recorded in ``store``, with their progress lines scrubbed."""
    parts = SessionParts(
        store=store,
        environ=_session_environ(call.harness_base, agents.identity),
        scrub=scrub,
        clock=clock,
        progress=say,
        interrupt=call.interrupt,
        on_outage=call.on_outage,
    )
    bounds = SessionBounds(
        watchdogs=settings.session_watchdogs,
        grace_seconds=settings.session_stop_grace_seconds,
        store_wait_seconds=settings.salvage_wait_seconds,
        output_caps=settings.session_output_caps,
        min_free_disk_mb=settings.min_free_disk_mb,
        budgets=agents.budgets,
        prices=settings.model_prices,
    )
    seal = AgentSeal(
        sandbox=agents.sandbox,
        home=agents.home,
        hidden=hidden_from_agents(settings, call.environ),
        groups=agents.groups,
        limits=session_limits(settings),
        network_allow=settings.agent_network_allow_for,
    )
    harnesses = HarnessChoice(
        agents.harness,
        settings.model_for(settings.harness),
        agents.fallbacks,
        settings.provider_wait_seconds,
    )
    return CliSessions(
        harnesses,
        parts,
        bounds,
        seal,
        logs_dir=settings.home / "logs",
        resume_cap_tokens=settings.resume_preamble_tokens,
    )
