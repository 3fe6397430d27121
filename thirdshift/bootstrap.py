"""The composition root of a Run: the one place real adapters, the scrubber and the clock are
built and wired together.

Both ``thirdshift run`` and ``thirdshift demo`` come through here, so the demo runs exactly
what a user runs. Below this module nothing reads the process environment, builds an adapter
or makes its own scrubber: each receives what it needs from here.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from apscheduler.triggers.cron import CronTrigger
from pydantic import SecretStr

from thirdshift.actions import Runner, decide, read_event
from thirdshift.clock import Clock, SystemClock
from thirdshift.daemon import ActivityLog, Daemon, ProviderPauses, ReadyRules, RepositoryPoll
from thirdshift.daemon.daemon import Limits
from thirdshift.daemon.ready import blocker_reason, labeller_reason, pass_over_notification
from thirdshift.daemon.state import write_state
from thirdshift.doctor import Check, SystemOutside, diagnose
from thirdshift.errors import (
    ConfigError,
    NotFound,
    ThirdshiftError,
    UsageError,
)
from thirdshift.git import Identity, ManagedClone
from thirdshift.github import GitHub
from thirdshift.github.app import InstallationTokens
from thirdshift.github.requests import TOKEN, Credential
from thirdshift.harnesses import AgentSandbox, harness_named, probe
from thirdshift.home import Home, check_home
from thirdshift.issue_url import IssueRef, check_same_host, web_host_of
from thirdshift.notify import AppriseTarget, Notifier, Target, WebhookTarget
from thirdshift.records import ProviderOutage, RepoInfo, Run, SessionRecord
from thirdshift.runs import (
    PASSED_OVER,
    PERMISSIONS_THAT_PUSH,
    ArchitectRequest,
    ArchitectRun,
    Delivery,
    RunHooks,
    RunOutcome,
    RunParts,
    RunRequest,
    token_role,
)
from thirdshift.scrub import Scrubber, looks_secret
from thirdshift.sessions.cli_outside import CliSessions, Fallback
from thirdshift.sessions.ledger import Budgets, unpriced_harnesses
from thirdshift.settings import Settings, check_repository_name, cron_trigger, load_settings
from thirdshift.store import Store
from thirdshift.web import StatusServer, StorePageSource, make_app
from thirdshift.web.server import is_loopback, is_wildcard, own_host_names, parse_address

MIN_PAGE_TOKEN = 16
"""The status page's token is a password on the network: a short one is guessed (and the
scrubber ignores secrets shorter than 8 characters)."""


def hidden_from_agents(settings: Settings, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """What an agent must not see besides thirdshift's home: the user's home (from the
    environment, else the password database), the SQLite database's directory, the
    Harnesses' own configuration directories (their transcripts of other work), and a GitHub
    App's private key file."""
    found = [Path(environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)]
    if settings.sqlite_directory is not None:
        found.append(settings.sqlite_directory)
    found += [
        Path(environ[name]) for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME") if environ.get(name)
    ]
    if settings.github_app_private_key_file is not None:
        found.append(settings.github_app_private_key_file)  # a file: it reads as empty
    return tuple(found)


@dataclass(frozen=True)
class _RunParts:
    """What a Run and an Architect run are built from: one scrubber, one clock, the GitHub
    adapter, the Harness's sessions and the managed clone."""

    scrub: Scrubber
    say: Callable[[str], None]
    clock: Clock
    github: GitHub
    session_source: CliSessions
    clone_of: Callable[[IssueRef, RepoInfo], ManagedClone]
    environ: Mapping[str, str]
    store: Store

    def run_parts(self, settings: Settings) -> RunParts:
        """What a Run kind is built from."""
        return RunParts(
            settings=settings,
            github=self.github,
            store=self.store,
            session_source=self.session_source,
            clones=self.clone_of,
            environ=self.environ,
            scrub=self.scrub,
            clock=self.clock,
        )


def outcome_of(
    work: Callable[[], RunOutcome],
    say: Callable[[str], None],
    scrub: Scrubber,
    recorded: Sequence[int] = (),
) -> RunOutcome:
    """``work``'s outcome; an error it stops on is said on the progress lines first, and is
    the outcome (of the Run ``recorded`` names, when it got that far)."""
    try:
        return work()
    except ThirdshiftError as error:
        say(f"thirdshift: {error}")
        outcome = RunOutcome.of_error(error, recorded[-1] if recorded else None)
        return replace(outcome, cause=scrub(str(error)))


def delivery(parts: RunParts, hooks: RunHooks) -> Delivery:
    """A Run of one issue, from its parts: real adapters here, fakes in the orchestration
    tests (the only other builder)."""
    return Delivery(parts, hooks)


def architect_run(parts: RunParts, hooks: RunHooks, *, web_host: str) -> ArchitectRun:
    """An Architect run, from its parts, as for ``delivery``."""
    return ArchitectRun(parts, hooks, web_host=web_host)


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
    if not sandbox.sealed:
        say("warning: agents run without their sandbox (unsafe_agent_without_sandbox)")
    elif not sandbox.network_sealed:
        say("warning: agents share this host's network (unsafe_agent_network)")
    return sandbox


@contextmanager
def _run_parts(
    settings: Settings,
    owner: str,
    name: str,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    interrupt: threading.Event,
    agent_environ: Mapping[str, str] | None,
    store: Store | None,
    on_outage: Callable[[ProviderOutage], None],
) -> Iterator[_RunParts]:
    """The parts, after the local pre-flight (Harnesses on PATH, the home, the sandbox) and
    before anything else; the database is opened (unless ``store`` is given) and closed."""
    known = [*credential_secrets(settings), *setting_secrets(settings)]
    harness_base = environ if agent_environ is None else agent_environ
    agent_secrets = [value for key, value in harness_base.items() if looks_secret(key)]
    scrub = Scrubber.from_environment(environ, [*known, *agent_secrets])

    def say(line: str) -> None:
        progress(scrub(line))

    harness = harness_named(
        settings.harness,
        extra_args=[*settings.harness_args, *settings.harness_options.get(settings.harness, [])],
    )
    # The Harnesses a provider outage switches to, each with its own options and Model: the
    # Run's harness_args and model belong to its own Harness and never cross over.
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
                f"{fallback.harness.executable} (the {fallback.harness.name} Harness, a fallback "
                "in harness_fallbacks) is not on PATH; install it or take it out of "
                "harness_fallbacks"
            )
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
    # Local pre-flight: a machine problem stops here, before anything on GitHub changes.
    home = Home(settings.home)
    check_home(home, database_dir=settings.sqlite_directory, min_free_mb=settings.min_free_disk_mb)
    sandbox = agent_sandbox(settings, environ, say)
    # Every wait (GitHub's retries and rate limits, CI polls) ends at once on Ctrl-C or SIGTERM.
    clock = SystemClock(interrupt)
    identity = Identity(settings.git_user_name, settings.git_user_email)
    credentials = _credentials(settings, owner, name, clock=clock, scrub=scrub, progress=say)

    def clone_of(ref: IssueRef, repo: RepoInfo) -> ManagedClone:
        return ManagedClone(
            settings.home,
            repo.owner,  # GitHub's spelling, whatever the Issue URL's case
            repo.name,
            repo.clone_url,
            credentials.token,
            identity,
            scrub=scrub,
            environ=environ,
            credential=credentials.words.name,
        )

    # The agent commits as the factory: its HOME may hold no git identity at all.
    session_environ = {
        **harness_base,
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
    }
    own_store = store is None
    if store is None:
        store = Store.open(settings.effective_database_url)
    try:
        yield _RunParts(
            scrub=scrub,
            say=say,
            clock=clock,
            github=_adapter(settings, credentials, scrub=scrub, clock=clock, progress=say),
            session_source=CliSessions(
                harness=harness,
                store=store,
                environ=session_environ,
                logs_dir=settings.home / "logs",
                watchdogs=settings.session_watchdogs,
                output_caps=settings.session_output_caps,
                grace_seconds=settings.session_stop_grace_seconds,
                interrupt=interrupt,
                progress=say,
                scrub=scrub,
                clock=clock,
                sandbox=sandbox,
                home=home,
                hidden=hidden_from_agents(settings, environ),
                model=settings.model_for(settings.harness),
                resume_cap_tokens=settings.resume_preamble_tokens,
                budgets=budgets,
                prices=settings.model_prices,
                fallbacks=fallbacks,
                provider_wait_seconds=settings.provider_wait_seconds,
                on_outage=on_outage,
                network_allow=settings.agent_network_allow_for,
                store_wait_seconds=settings.salvage_wait_seconds,
            ),
            clone_of=clone_of,
            environ=harness_base,
            store=store,
        )
    finally:
        if own_store:
            store.close()


def run_issue(
    settings: Settings,
    request: RunRequest,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
    agent_environ: Mapping[str, str] | None = None,
    store: Store | None = None,
    claimant: str = "thirdshift run",
    stopped_because: Callable[[], str | None] = lambda: None,
    on_recorded: Callable[[int], None] = lambda _run_id: None,
    on_outage: Callable[[ProviderOutage], None] = lambda _outage: None,
) -> RunOutcome:
    """Run one issue to its outcome. Errors before the Run starts (pre-flight) are reported
    on ``progress``, change nothing and are the outcome.

    ``environ`` is thirdshift's own process environment: its secrets are scrubbed and emptied
    for git. ``agent_environ`` (default: the same) is what the Harness's environment is built
    from; the demo gives one pointing the CLI at the scripted model server.

    A daemon passes its ``store`` (shared by its Runs), its name as ``claimant``, what says
    why it stopped a Run (``stopped_because``) and what learns the Run's id once it is recorded
    (``on_recorded``) and what learns of a provider outage (``on_outage``: the daemon's
    pauses); each Run still gets its own clock, GitHub adapter and interrupt."""
    check_same_host(request.issue, settings.github_api_url)
    with _run_parts(
        settings,
        request.issue.owner,
        request.issue.repo,
        environ=environ,
        progress=progress,
        interrupt=interrupt,
        agent_environ=agent_environ,
        store=store,
        on_outage=on_outage,
    ) as parts:
        recorded: list[int] = []

        def recording(run_id: int) -> None:
            recorded.append(run_id)
            on_recorded(run_id)

        run = delivery(
            parts.run_parts(settings),
            RunHooks(
                progress=parts.say,
                interrupt=interrupt,
                emit_url=emit_url,
                claimant=claimant,
                stopped_because=stopped_because,
                on_recorded=recording,
                notifier=notifier_of(settings, scrub=parts.scrub, progress=parts.say),
            ),
        )
        return outcome_of(lambda: run.run(request), parts.say, parts.scrub, recorded)


def run_architect(
    settings: Settings,
    request: ArchitectRequest,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
    store: Store | None = None,
    claimant: str = "thirdshift architect",
    on_recorded: Callable[[int], None] = lambda _run_id: None,
    on_outage: Callable[[ProviderOutage], None] = lambda _outage: None,
) -> RunOutcome:
    """One Architect run on ``request``'s repository, to its outcome (exit status 0 published,
    covered or skipped; 1 failed; 3 another Architect run holds the repository). A daemon
    passes its store, its name and what learns the Run's id, as for ``run_issue``."""
    owner, name = check_repository_name(f"{request.owner}/{request.name}")
    with _run_parts(
        settings,
        owner,
        name,
        environ=environ,
        progress=progress,
        interrupt=interrupt,
        agent_environ=None,
        store=store,
        on_outage=on_outage,
    ) as parts:
        recorded: list[int] = []

        def recording(run_id: int) -> None:
            recorded.append(run_id)
            on_recorded(run_id)

        architect = architect_run(
            parts.run_parts(settings),
            RunHooks(
                progress=parts.say,
                interrupt=interrupt,
                emit_url=emit_url,
                claimant=claimant,
                on_recorded=recording,
                notifier=notifier_of(settings, scrub=parts.scrub, progress=parts.say),
            ),
            web_host=web_host_of(settings.github_api_url),
        )
        return outcome_of(lambda: architect.run(request), parts.say, parts.scrub, recorded)


def run_daemon(
    settings: Settings,
    *,
    repositories: Sequence[str],
    once: bool,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    stop: threading.Event,
    http: str | None = None,
) -> int:
    """Watch ``repositories`` (with those of the settings) until ``stop`` is set, or for one
    cycle with ``once``; with ``http`` (HOST:PORT), serve the status page there meanwhile,
    always behind a token (``http_token``, or one made for this process and shown once on the
    progress lines with the page's address). Pre-flight problems (no token, a repository the
    token cannot push to, an unusable home, no sandbox, a status page bound beyond loopback
    without http_token) stop it before it starts."""
    configured = settings.http_token.get_secret_value() if settings.http_token else None
    address = parse_address(http) if http else None
    if address is not None and not is_loopback(address[0]) and not configured:
        raise ConfigError(
            f"--http {http}: beyond loopback the status page needs a token; set "
            "THIRDSHIFT_HTTP_TOKEN (or http_token in the config file), or bind 127.0.0.1"
        )
    if configured is not None and len(configured) < MIN_PAGE_TOKEN:
        raise ConfigError(
            f"http_token is shorter than {MIN_PAGE_TOKEN} characters; use a long random one "
            "(for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    settings, made_token = with_page_token(settings, served=address is not None)
    # Read after the token is in place: every scrubber of the daemon and its Runs knows it.
    known = [*credential_secrets(settings), *setting_secrets(settings)]
    page_token = settings.http_token.get_secret_value() if settings.http_token else ""
    spelled: dict[str, str] = {}
    for full_name in [*settings.repositories, *repositories]:
        spelled.setdefault(full_name.lower(), full_name)  # GitHub ignores case: one poll each
    names = list(spelled.values())
    if not names:
        raise UsageError(
            "no repository to watch: pass --repo OWNER/NAME or set repositories in the config file"
        )
    agent_secrets = [value for name, value in environ.items() if looks_secret(name)]
    scrub = Scrubber.from_environment(environ, [*known, *agent_secrets])

    def say(line: str) -> None:
        progress(scrub(line))

    home = Home(settings.home)
    check_home(home, database_dir=settings.sqlite_directory, min_free_mb=settings.min_free_disk_mb)
    agent_sandbox(settings, environ, say)  # a machine that cannot seal agents runs none
    notifier = notifier_of(settings, scrub=scrub, progress=say)
    clock = SystemClock(stop)
    # One adapter per set of credentials: a GitHub App has one installation per account, so
    # repositories of several owners may need several.
    adapters: dict[int | None, GitHub] = {}
    canonical: list[tuple[str, str, GitHub]] = []
    for full_name in names:
        owner, name = check_repository_name(full_name)
        credentials = _credentials(settings, owner, name, clock=clock, scrub=scrub, progress=say)
        github = adapters.get(credentials.installation)
        if github is None:
            github = _adapter(settings, credentials, scrub=scrub, clock=clock, progress=say)
            adapters[credentials.installation] = github
        login = github.authenticated_login()
        try:
            role = token_role(github, owner, name, login)
        except NotFound as error:
            raise ConfigError(
                f"GitHub has no repository {full_name}, or the token's user {login} cannot "
                "see it; check the name (--repo or the repositories setting) and the token"
            ) from error
        if role not in PERMISSIONS_THAT_PUSH:
            raise ConfigError(
                f"the token's user {login} has {role} permission on {full_name}; the daemon "
                "needs write there, so use a token with write access or drop the repository"
            )
        found = github.repo(owner, name)
        # GitHub's spelling, for paths and records.
        canonical.append((found.owner, found.name, github))
    daemon_name = settings.daemon_name or socket.gethostname()
    store = Store.open(settings.effective_database_url)
    try:
        activity = ActivityLog(
            store,
            daemon=daemon_name,
            directory=settings.home / "activity",
            clock=clock,
            scrub=scrub,
            progress=say,
        )

        # Which Harness's provider is down, as the daemon's Runs found out: shared by them all.
        pauses = ProviderPauses(clock, settings.provider_pause_seconds)

        def paused() -> str | None:
            return pauses.pass_over_reason(settings.harness, settings.fallback_harnesses)

        def start_run(
            request: RunRequest,
            interrupt: threading.Event,
            stopped_because: Callable[[], str | None],
            run_progress: Callable[[str], None],
            on_recorded: Callable[[int], None],
        ) -> RunOutcome:
            return run_issue(
                settings,
                request,
                environ=environ,
                progress=run_progress,
                emit_url=lambda _url: None,  # the Activity log and the progress lines say it
                interrupt=interrupt,
                store=store,
                claimant=f"daemon {daemon_name}",
                stopped_because=stopped_because,
                on_recorded=on_recorded,
                on_outage=pauses.pause,
            )

        def start_architect(
            owner: str,
            name: str,
            interrupt: threading.Event,
            run_progress: Callable[[str], None],
            on_recorded: Callable[[int], None],
        ) -> RunOutcome:
            return run_architect(
                settings,
                ArchitectRequest(owner=owner, name=name),
                environ=environ,
                progress=run_progress,
                emit_url=lambda _url: None,  # the Activity log and the progress lines say it
                interrupt=interrupt,
                store=store,
                claimant=f"daemon {daemon_name}",
                on_recorded=on_recorded,
                on_outage=pauses.pause,
            )

        schedules = architect_schedules(settings, [f"{o}/{n}" for o, n, _ in canonical])
        daemon = Daemon(
            start_architect=start_architect,
            # From cron (--once) a daemon keeps no schedule: cron calls thirdshift architect.
            architect_schedules={} if once else schedules,
            web_host=web_host_of(settings.github_api_url),
            start_run=start_run,
            store=store,
            activity=activity,
            limits=Limits(
                max_runs=settings.max_runs,
                max_runs_per_repository=settings.max_runs_per_repository,
                poll_seconds=settings.poll_seconds,
                poll_jitter_seconds=settings.poll_jitter_seconds,
                reap_seconds=max(5.0, settings.lease_seconds / 4),
                stop_seconds=stop_seconds(settings),
                store_wait_seconds=settings.salvage_wait_seconds,
            ),
            clock=clock,
            stop=stop,
            progress=say,
            name=daemon_name,
            scrub=scrub,
            publish=partial(write_state, settings.home / "daemons"),
            pauses=pauses.states,
            rate_limit=partial(_rate_limit_left, tuple(adapters.values())),
        )
        rules = _rules(settings)
        for owner, name, github in canonical:
            full_name = f"{owner}/{name}"
            daemon.watch(
                RepositoryPoll(
                    owner,
                    name,
                    github=github,
                    store=store,
                    rules=rules,
                    activity=activity,
                    clock=clock,
                    running_here=partial(daemon.running_here, full_name),
                    stop_here=partial(daemon.stop_here, full_name),
                    kept_worktree=partial(_kept_worktree, settings.home, owner, name),
                    sweeper=f"daemon {daemon_name}",
                    paused=paused,
                    notifier=notifier,
                )
            )
        server = None
        if address is not None:
            source = StorePageSource(store, daemon.snapshot, scrub, warn=say)
            own = own_host_names() if is_wildcard(address[0]) else ()
            app = make_app(
                source,
                token=page_token,
                host=address[0],
                port=address[1],
                also_hosts=[*own, *settings.http_hosts],
            )
            server = StatusServer(app, *address)
            server.start()
            if made_token is None:
                say(f"status page at {server.url} (it asks for http_token)")
            else:
                # The one place the made token is shown, so unscrubbed: the operator's terminal.
                progress(f"status page at {server.url}?token={made_token}")
        try:
            return daemon.once() if once else daemon.serve()
        finally:
            if server is not None:
                server.stop()
    finally:
        store.close()


def with_page_token(settings: Settings, *, served: bool) -> tuple[Settings, str | None]:
    """The settings a daemon runs with, and the token made for its status page (None when
    none was made). A daemon's agents run untrusted code on this machine, and loopback keeps
    nothing from them: a served page asks for a token, ``http_token`` or, when none is set, a
    random one made for this process. Made into ``http_token``, it is a secret of the settings,
    so every scrubber built from them knows it; it is in no environment, file or database."""
    if not served or settings.http_token is not None:
        return settings, None
    made = secrets.token_urlsafe(32)
    return settings.model_copy(update={"http_token": SecretStr(made)}), made


def architect_schedules(
    settings: Settings, watched: Sequence[str]
) -> dict[str, Callable[[datetime], datetime | None]]:
    """Each watched repository's Architect schedule (``architect_schedule``), by the name the
    daemon polls it under. A schedule for a repository the daemon does not watch would never
    fire: that is a mistake to name, not to ignore."""
    by_lower = {full_name.lower(): full_name for full_name in watched}
    found: dict[str, Callable[[datetime], datetime | None]] = {}
    for repository, expression in settings.architect_schedule.items():
        full_name = by_lower.get(repository.lower())
        if full_name is None:
            raise ConfigError(
                f"architect_schedule names {repository}, which this daemon does not watch; add "
                "it to repositories (or --repo), or take its schedule out"
            )
        found[full_name] = partial(_next_fire, cron_trigger(expression))
    return found


def _next_fire(trigger: CronTrigger, after: datetime) -> datetime | None:
    """The schedule's first time strictly after ``after``: a run that starts on the minute is
    not due again at once."""
    return trigger.get_next_fire_time(None, after + timedelta(seconds=1))  # type: ignore[no-any-return]


def run_event(
    settings: Settings,
    event_path: Path,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    write: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
) -> int:
    """Run the issue an ``issues`` event payload names (``thirdshift run --event``, on GitHub
    Actions), or say in one line why there is none and return 0. On a runner, the Run's
    lines are a log group, its errors workflow commands, its outcome the job summary and
    step outputs (``write`` puts a line where the runner reads commands)."""
    try:
        text = event_path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--event {event_path}: cannot be read ({error.strerror})") from error
    decision = decide(
        read_event(text, str(event_path)), settings.ready_label, environ.get("GITHUB_EVENT_NAME")
    )
    if not decision.runs:
        progress(f"nothing to run: {decision.why}")
        return 0
    if "github_api_url" not in settings.model_fields_set and environ.get("GITHUB_API_URL"):
        # The runner names the GitHub it serves: GitHub Enterprise works as github.com does.
        settings = settings.model_copy(update={"github_api_url": environ["GITHUB_API_URL"]})
    runner = Runner(environ, write) if Runner.detected(environ) else None
    scrub = Scrubber.from_environment(
        environ, [*credential_secrets(settings), *setting_secrets(settings)]
    )
    owner, name, number = decision.owner, decision.name, decision.number
    clock = SystemClock(interrupt)
    credentials = _credentials(settings, owner, name, clock=clock, scrub=scrub, progress=progress)
    github = _adapter(settings, credentials, scrub=scrub, clock=clock, progress=progress)
    try:
        role = github.permission(owner, name, decision.sender)
    except NotFound:
        role = "none"  # not a collaborator at all
    reason = labeller_reason(decision.sender, role, _rules(settings))
    if reason is not None and decision.labelled:
        # A label nobody may act on: its event comes once, so its message does too.
        ref = IssueRef(web_host_of(settings.github_api_url), owner, name, number)
        notifier_of(settings, scrub=scrub, progress=progress).notify(
            pass_over_notification(
                f"{owner}/{name}",
                number,
                f"https://{ref.host}/{owner}/{name}/issues/{number}",
                reason,
            )
        )
    if reason is None:
        # The daemon's other rules hold here too: an excluded label or an open blocker waits.
        issue = github.issue(owner, name, number)
        excluded = sorted(
            {label.lower() for label in issue.labels}
            & {x.lower() for x in settings.excluded_labels}
        )
        if excluded:
            reason = f"#{number} carries {', '.join(excluded)}; remove that label to run it"
        else:
            reason = blocker_reason(github.open_blockers(owner, name, number))
    if reason is not None:
        progress(f"nothing to run: {reason}")
        return 0
    ref = IssueRef(web_host_of(settings.github_api_url), owner, name, number)
    warnings: list[str] = []

    def say(line: str) -> None:
        progress(line)
        # Warnings are no ending: the runner shows them beside the outcome, once it is known.
        if line.startswith("warning: "):
            warnings.append(scrub(line.removeprefix("warning: ")))

    store = Store.open(settings.effective_database_url)
    try:
        if runner is not None:
            runner.group(f"thirdshift: a Run on {ref}")
        try:
            outcome = run_issue(
                settings,
                RunRequest(
                    issue=ref,
                    expect_ready=decision.labelled,
                    job_url=runner.job_url if runner else None,
                ),
                environ=environ,
                progress=say,
                emit_url=emit_url,
                interrupt=interrupt,
                store=store,
                claimant=(
                    f"GitHub Actions, labelled by {decision.sender}"
                    if decision.labelled
                    else f"GitHub Actions, started by {decision.sender}"
                ),
            )
        finally:
            if runner is not None:
                runner.end_group()
        if outcome.not_claimed:
            # An approval the text voided is the one reason worth more than "not claimed".
            cause = outcome.cause or ""
            passed = cause if PASSED_OVER in cause else f"{ref} is already being worked on"
            progress(f"nothing to run: {passed}")
            return 0
        if runner is not None:
            if outcome.state == "stopped" and outcome.cause:
                runner.error(scrub(outcome.cause))
            for message in warnings:
                runner.warning(message)
            run = store.get_run(outcome.run_id) if outcome.run_id is not None else None
            sessions = store.run_sessions(run.id) if run else []
            _report(runner, run, ref, outcome, sessions=sessions)
        return outcome.exit_code
    finally:
        store.close()


def run_doctor(
    repositories: Sequence[str],
    *,
    environ: Mapping[str, str],
    report: Callable[[Check], None],
    progress: Callable[[str], None],
    session: bool = False,
) -> list[Check]:
    """Every check of ``thirdshift doctor`` (with ``repositories`` besides the configured ones),
    each handed to ``report`` as it is made, scrubbed: no secret of the environment or the
    settings ever reaches the report."""
    # When these cannot be read, the settings check and the GitHub check say why.
    scrub = Scrubber.from_environment(environ, known_secrets(environ))
    clock = SystemClock(threading.Event())

    def say(line: str) -> None:
        progress(scrub(line))

    def github_for(settings: Settings, repository: tuple[str, str] | None) -> GitHub:
        # A token ignores the repository; a GitHub App needs it to find its installation.
        owner, name = repository or ("", "")
        credentials = _credentials(settings, owner, name, clock=clock, scrub=scrub, progress=say)
        return _adapter(settings, credentials, scrub=scrub, clock=clock, progress=say)

    def notification_targets(settings: Settings) -> tuple[str, ...]:
        return notifier_of(settings, scrub=scrub, progress=say).names

    outside = SystemOutside(
        environ,
        github_for=github_for,
        hidden=lambda settings: hidden_from_agents(settings, environ),
        notification_targets=notification_targets,
    )

    def scrubbed(check: Check) -> Check:
        return replace(check, detail=scrub(check.detail), fix=scrub(check.fix))

    checks = diagnose(
        outside, repositories, report=lambda check: report(scrubbed(check)), session=session
    )
    return [scrubbed(check) for check in checks]


@dataclass(frozen=True)
class _Credentials:
    """What thirdshift acts on GitHub with, for one repository: the source of the current
    token, the login it acts as when the token cannot say, and the App installation it
    belongs to (None for a personal token)."""

    token: Callable[[], str]
    login: str | None
    installation: int | None
    words: Credential = TOKEN


def _app_key(settings: Settings) -> str | None:
    """The GitHub App's private key, when an App is configured; ConfigError for half an App."""
    key_text = settings.github_app_private_key
    key_file = settings.github_app_private_key_file
    if key_text is not None and key_file is not None:
        raise ConfigError(
            "the GitHub App's private key is given twice (github_app_private_key and "
            "github_app_private_key_file); keep one"
        )
    key: str | None = None
    if key_text is not None:
        key = key_text.get_secret_value()
    elif key_file is not None:
        try:
            key = key_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(
                f"github_app_private_key_file {key_file}: cannot be read ({error}); give the "
                ".pem file GitHub generated for the App"
            ) from error
    if key is None and settings.github_app_id is None:
        return None
    if key is None:
        raise ConfigError(
            "THIRDSHIFT_GITHUB_APP_ID is set but the App's private key is not: set "
            "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY (or github_app_private_key_file; on GitHub "
            "Actions, the repository secret THIRDSHIFT_APP_PRIVATE_KEY)"
        )
    if settings.github_app_id is None:
        raise ConfigError(
            "a GitHub App's private key is set but not its id: set THIRDSHIFT_GITHUB_APP_ID "
            "(the App ID on the App's settings page; on GitHub Actions, the repository secret "
            "THIRDSHIFT_APP_ID)"
        )
    return key


def known_secrets(environ: Mapping[str, str]) -> list[str]:
    """Every secret of the settings a scrubber must know, as far as they can be read: for the
    commands that read (``logs``, ``doctor``), which must work without GitHub credentials."""
    try:
        settings = load_settings(environ)
    except ThirdshiftError:
        return []
    known = setting_secrets(settings)
    with suppress(ThirdshiftError):  # no GitHub credentials: nothing of theirs to hide
        known.extend(credential_secrets(settings))
    return known


def setting_secrets(settings: Settings) -> list[str]:
    """The secrets of the settings besides GitHub's: the notification targets' and the status
    page's token."""
    page = [settings.http_token.get_secret_value()] if settings.http_token is not None else []
    return [*notification_secrets(settings), *page]


def notification_secrets(settings: Settings) -> list[str]:
    """The secret texts of the notification settings, for the scrubber: the webhook's secret
    and URL (a URL may carry a token in its path), and each Apprise URL whole and in the parts
    that carry its credentials (user, password, host-like tokens, path and query words)."""
    found: list[str] = []
    if settings.notify_webhook_secret is not None:
        found.append(settings.notify_webhook_secret.get_secret_value())
    if settings.notify_webhook_url:
        found.append(settings.notify_webhook_url)
    for url in settings.notify_urls:
        found += [url, *url_secret_parts(url)]
    return [value for value in found if value.strip()]


def url_secret_parts(url: str) -> list[str]:
    """The parts of an Apprise URL that may be credentials: every user, password, host, path
    segment and query value of 8 characters or more, except plain host names (``gmail.com``),
    which would otherwise be scrubbed out of every message."""
    parts = urlsplit(url)
    words = [parts.username or "", parts.password or "", parts.hostname or ""]
    words += [unquote(segment) for segment in parts.path.split("/")]
    words += [value for _, value in parse_qsl(parts.query)]
    return [word for word in words if len(word) >= 8 and not _HOST_NAME.fullmatch(word)]


_HOST_NAME = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")


def notifier_of(
    settings: Settings, *, scrub: Scrubber, progress: Callable[[str], None]
) -> Notifier:
    """The Notifier of the configured targets (none: it sends nothing). A webhook without its
    secret, or an Apprise URL Apprise does not know, is a ConfigError before anything starts."""
    targets: list[Target] = []
    if settings.notify_webhook_url:
        secret = settings.notify_webhook_secret
        targets.append(
            WebhookTarget(settings.notify_webhook_url, secret.get_secret_value() if secret else "")
        )
    targets += [AppriseTarget(url, i) for i, url in enumerate(settings.notify_urls, start=1)]
    return Notifier(targets, scrub=scrub, progress=progress)


def credential_secrets(settings: Settings) -> list[str]:
    """The secret texts of the configured credentials, for the scrubber: the App's private
    key (whole and line by line), or the token. ConfigError when there are none."""
    key = _app_key(settings)
    if key is not None:
        lines = [line.strip() for line in key.splitlines()]
        return [key, *(line for line in lines if line and not line.startswith("-----"))]
    token = settings.github_token.get_secret_value().strip() if settings.github_token else ""
    if not token:
        raise ConfigError(
            "no GitHub token: set GITHUB_TOKEN (or THIRDSHIFT_GITHUB_TOKEN), or a GitHub App's "
            "THIRDSHIFT_GITHUB_APP_ID and THIRDSHIFT_GITHUB_APP_PRIVATE_KEY"
        )
    return [token]


def _credentials(
    settings: Settings,
    owner: str,
    name: str,
    *,
    clock: Clock,
    scrub: Scrubber,
    progress: Callable[[str], None],
) -> _Credentials:
    """The credentials for ``owner/name``: a GitHub App's installation tokens when an App is
    configured (it wins over a token: it is the one whose pushes start CI), else the token."""
    key = _app_key(settings)
    if key is None or settings.github_app_id is None:
        token = credential_secrets(settings)[0]
        return _Credentials(lambda: token, settings.github_login, None)
    tokens = InstallationTokens(
        settings.github_api_url,
        settings.github_app_id,
        key,
        owner,
        name,
        clock=clock,
        scrub=scrub,
        progress=progress,
    )
    # The installation first: its errors name the App's installation, the likeliest fault.
    installation = tokens.installation_id
    return _Credentials(tokens, tokens.login(), installation, tokens.credential)


def _adapter(
    settings: Settings,
    credentials: _Credentials,
    *,
    scrub: Scrubber,
    clock: Clock,
    progress: Callable[[str], None],
) -> GitHub:
    """The GitHub adapter acting with ``credentials``."""
    return GitHub(
        settings.github_api_url,
        credentials.token,
        scrub=scrub,
        clock=clock,
        progress=progress,
        login=credentials.login,
        credential=credentials.words,
    )


def _rate_limit_left(adapters: Sequence[GitHub]) -> int | None:
    """The smallest core rate-limit budget left among the daemon's credentials, as GitHub's
    last answers said it: never a request of its own, so it never waits on GitHub."""
    known = [left for left in (a.rate_limit_seen() for a in adapters) if left is not None]
    return min(known) if known else None


def _rules(settings: Settings) -> ReadyRules:
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


def _report(
    runner: Runner,
    run: Run | None,
    ref: IssueRef,
    outcome: RunOutcome,
    *,
    sessions: Sequence[SessionRecord] = (),
) -> None:
    """The job summary and step outputs of a Run from its outcome (``run``: its record, None
    when it stopped before it was recorded): what a reviewer needs without opening the log."""
    state = run.state if run else "not recorded"
    url = outcome.pull_request_url or ""
    cause = outcome.cause if run is not None else None
    rows = [
        ("Issue", f"{ref}"),
        ("Pull request", url or "none"),
        ("State", state),
    ]
    if outcome.checks:
        rows.append(("Checks", outcome.checks))
    elif cause:
        rows.append(("Checks", "see the cause"))
    if cause:
        rows.append(("Cause", _code_span(cause)))
    if sessions:
        rows.append(("Sessions", ", ".join(_session_cell(s) for s in sessions)))
        costs = [s.usage.cost_usd for s in sessions if s.usage.cost_usd is not None]
        cost = f"${sum(costs):.4f}" if costs else "not reported"
        if costs and len(costs) < len(sessions):
            cost += f" ({len(sessions) - len(costs)} session(s) reported none)"
        rows.append(("Cost", cost))
    if run is not None and run.last_session_log:
        rows.append(("Last Session log", _code_span(Path(run.last_session_log).name)))
    if sessions and runner.job_url:
        artifact = _code_span(runner.session_logs_artifact)
        rows.append(("Session logs", f"artifact {artifact} on [the run's page]({runner.job_url})"))
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    runner.summary(f"### thirdshift: {ref}\n\n| | |\n|---|---|\n{table}\n")
    runner.output("state", state)
    if url:
        runner.output("pull-request-url", url)
    if outcome.exit_code != 0 and cause:
        runner.error(cause, title=f"thirdshift could not finish {ref}")


def _session_cell(session: SessionRecord) -> str:
    """One session in the summary: its kind, Harness and how it ended."""
    return _code_span(f"{session.kind} ({session.harness}, {session.state})")


def _code_span(text: str) -> str:
    """``text`` as inline code in a table cell: no markup, link or line break of its own."""
    flat = " ".join(text.split()).replace("`", "'").replace("|", "/")
    return f"`{flat}`"


def stop_seconds(settings: Settings) -> float:
    """How long a stopping daemon waits for its Runs: each stops its session (a grace period,
    then a kill after another) and saves its work within the salvage's time, plus a margin for
    git and the database."""
    return settings.salvage_wait_seconds + 2 * settings.session_stop_grace_seconds + 60


def _kept_worktree(home: Path, owner: str, name: str, branch: str) -> bool:
    return (home / "worktrees" / f"{owner}-{name}-{branch}").is_dir()


__all__ = ["IssueRef", "RunRequest", "run_daemon", "run_doctor", "run_event", "run_issue"]
