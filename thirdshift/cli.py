"""The ``thirdshift`` command: the composition root, the only place real adapters are built.

stdout carries data only (URLs); stderr carries timestamped progress and errors. Exit status 0
on success, 1 on failure (any ThirdshiftError), 2 on a usage error.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import click

from thirdshift import __version__
from thirdshift.console import LiveProgress, Progress, format_duration, printable, progress_for
from thirdshift.errors import ThirdshiftError


def _fail(error: ThirdshiftError) -> NoReturn:
    click.echo(f"thirdshift: {error}", err=True)
    sys.exit(error.exit_code)


def _show(text: str) -> None:
    """A line for a person's terminal: what an agent printed (a log line, a prompt) may hold
    control characters, which are shown, never acted on."""
    with suppress(OSError, ValueError):
        click.echo(printable(text))


def _emit(url: str) -> None:
    """A URL on stdout; a closed terminal (SIGHUP) must not stop the Run saving its work."""
    with suppress(OSError, ValueError):
        click.echo(url)


def _guarded(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except ThirdshiftError as error:
        _fail(error)


def wait_for_interrupt(
    progress: Callable[[str], None], what: str, interrupt: threading.Event
) -> None:
    """Block until Ctrl-C or SIGTERM sets ``interrupt``; the caller then stops its servers."""
    progress(f"{what}; press Ctrl-C to stop")
    while not interrupt.wait(3600):
        pass
    progress("interrupted, stopping")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="thirdshift")
def main() -> None:
    """Turn GitHub issues labelled ready-for-agent into pull requests thirdshift stands behind."""


@main.command("config")
def config_command() -> None:
    """Check the configuration and the database, and show the settings in force (the token is
    never shown)."""
    import os

    from thirdshift.settings import load_settings
    from thirdshift.store import Store, redact_url

    settings = _guarded(lambda: load_settings(os.environ))
    store = _guarded(lambda: Store.open(settings.effective_database_url))
    store.close()
    click.echo(f"home: {settings.home}")
    click.echo(f"database: {redact_url(settings.effective_database_url)}")
    click.echo(f"github api: {settings.github_api_url}")
    click.echo(f"github token: {'set' if settings.github_token else 'not set'}")
    if settings.github_app_id is not None:
        # The App wins over the token: its installation tokens are what thirdshift acts with.
        click.echo(f"github app: {settings.github_app_id} (its installation tokens act)")
    click.echo(f"agent sandbox: {_guarded(lambda: sandbox_mode(settings))}")
    reach = " and ".join(
        filter(None, ["its model provider", ", ".join(settings.agent_network_allow)])
    )
    if settings.agent_network_allow_by_repository:
        reach += f" (more for {len(settings.agent_network_allow_by_repository)} repositories)"
    click.echo(f"agent network: {reach}")


@main.command("usage")
@click.option(
    "--by",
    "group",
    type=click.Choice(["run", "repository", "day"]),
    default="day",
    show_default=True,
    help="What to add the sessions up by (days are UTC).",
)
@click.option("--repo", "repository", metavar="OWNER/NAME", help="Only this repository's Runs.")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Only sessions started in the last N days (UTC, today included).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
def usage_command(group: str, repository: str | None, days: int, as_json: bool) -> None:
    """The usage ledger: tokens, cost and Harnesses of the sessions, added up."""
    import json
    import os
    from datetime import UTC, datetime, timedelta

    from thirdshift.console import format_duration
    from thirdshift.report import shapes
    from thirdshift.settings import check_repository_name, load_settings
    from thirdshift.store import Store

    if repository is not None:
        try:
            check_repository_name(repository)
        except ValueError as error:
            raise click.UsageError(f"--repo: {error}") from None
    settings = _guarded(lambda: load_settings(os.environ))
    store = _guarded(lambda: Store.open(settings.effective_database_url))
    try:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        since = today - timedelta(days=days - 1)
        totals = _guarded(lambda: store.usage_ledger(group, since=since, repository=repository))
    finally:
        store.close()
    if as_json:
        for total in totals:
            click.echo(json.dumps(shapes.usage_total_shape(total)))
        return
    if not totals:
        click.echo(f"no sessions in the last {days} day(s)")
        return
    for total in totals:
        unpriced = f" + {total.unpriced_sessions} unpriced" if total.unpriced_sessions else ""
        cached = total.cached_input_tokens
        took = format_duration(total.duration_seconds)
        click.echo(
            f"{total.label}: ${total.cost_usd:.4f}{unpriced}, {total.sessions} session(s) "
            f"over {took}, "
            f"{total.input_tokens} tokens in ({cached} cached, {total.cache_write_tokens} "
            f"written to the cache), {total.output_tokens} out; {', '.join(total.harnesses)}"
        )


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def status_command(as_json: bool) -> None:
    """What the daemons are doing: each daemon's polls, Runs, queue, Harness pauses and GitHub
    rate-limit budget (as it last wrote them in this home), and from the database the Leases
    held, the Runs running and what was passed over in the last day."""
    import json
    import os
    from datetime import UTC, datetime, timedelta

    from thirdshift.daemon.state import is_live, read_states
    from thirdshift.report import reading, shapes
    from thirdshift.settings import load_settings
    from thirdshift.store import Store

    settings = _guarded(lambda: load_settings(os.environ))
    store = _guarded(lambda: Store.open(settings.effective_database_url))
    now = datetime.now(UTC)
    try:
        names = {repository.id: repository.full_name for repository in store.repositories()}
        leases = [
            (names[repository.id], lease)
            for repository in store.repositories()
            for lease in store.live_leases(repository)
        ]
        running = store.list_runs(state="running", limit=200)
        usage = reading.usage_by_run(store, running)
        latest: dict[tuple[str | None, int | None], Any] = {}
        for line in store.activity(limit=1000):
            if line.kind == "pass-over" and now - line.created_at < timedelta(days=1):
                latest[(line.repository, line.issue_number)] = line
    finally:
        store.close()
    daemons = read_states(settings.home / "daemons")
    if as_json:
        _show(
            json.dumps(
                {
                    "type": "status",
                    "version": 1,
                    # A file written before the daemon state had its type and version is the
                    # same shape, version 1.
                    "daemons": [
                        {"type": "daemon_state", "version": 1}
                        | state
                        | {"live": is_live(state, now)}
                        for state in daemons
                    ],
                    "leases": [shapes.lease_shape(lease, name) for name, lease in leases],
                    "running": [shapes.run_shape(run, usage.get(run.id)) for run in running],
                    "passed_over": [shapes.activity_shape(line) for line in latest.values()],
                }
            )
        )
        return
    for line in _status_lines(daemons, now):
        _show(line)
    _show("Leases held:" if leases else "Leases held: none")
    for name, lease in leases:
        run = f", Run {lease.run_id}" if lease.run_id else ""
        held = (
            f"{name} (Architect run)" if lease.issue_number == 0 else f"{name}#{lease.issue_number}"
        )
        _show(
            f"  {held}: {lease.owner}{run}, until "
            f"{_clock_time(lease.expires_at)} (fencing token {lease.fencing_token})"
        )
    _show("Runs running:" if running else "Runs running: none")
    for run in running:
        took = format_duration((now - run.started_at).total_seconds())
        _show(f"  Run {run.id} on {run.subject}, for {took}")
    _show("Passed over in the last day:" if latest else "Passed over in the last day: none")
    for line in latest.values():
        reason = line.message.removeprefix("passed over: ")
        _show(f"  {line.repository}#{line.issue_number}: {reason}")


def _status_lines(daemons: list[dict[str, Any]], now: Any) -> list[str]:
    """What each daemon last said of itself, as ``thirdshift status`` prints it."""
    from datetime import datetime

    from thirdshift.daemon.state import is_live

    if not daemons:
        return ["no daemon has run in this home (thirdshift daemon writes its state here)"]
    lines: list[str] = []
    for state in daemons:
        seen = datetime.fromisoformat(str(state["updated_at"]))
        if not is_live(state, now):
            lines.append(f"daemon {state['daemon']}: not running (last seen {_clock_time(seen)})")
            continue
        since = datetime.fromisoformat(str(state["started_at"]))
        doing = "stopping, saving its Runs" if state.get("stopping") else "running"
        lines.append(
            f"daemon {state['daemon']} (pid {state['pid']}): {doing} since {_clock_time(since)}"
        )
        for poll in state.get("repositories", []):
            last = poll.get("last_poll_at")
            upcoming = poll.get("next_poll_at")
            said = (
                f"last poll {_clock_time(datetime.fromisoformat(last))}" if last else "no poll yet"
            )
            if poll.get("last_poll_error"):
                said += f" (failed: {poll['last_poll_error']})"
            if upcoming:
                said += f", next {_clock_time(datetime.fromisoformat(upcoming))}"
            architect = poll.get("next_architect_at")
            if architect:
                said += f"; next Architect run {_clock_time(datetime.fromisoformat(architect))}"
            queued = poll.get("queued") or []
            if queued:
                said += "; waiting for a slot: " + ", ".join(f"#{n}" for n in queued)
            lines.append(f"  {poll['repository']}: {said}")
        for run in state.get("running", []):
            started = datetime.fromisoformat(str(run["started_at"]))
            which = f"Run {run['run_id']}" if run.get("run_id") else "a Run starting"
            took = format_duration((now - started).total_seconds())
            what = (
                f"{run['repository']} (Architect run)"
                if run["issue_number"] == 0
                else f"{run['repository']}#{run['issue_number']}"
            )
            lines.append(f"  running: {what} ({which}, for {took})")
        for pause in state.get("pauses", []):
            until = _clock_time(datetime.fromisoformat(str(pause["until"])))
            lines.append(f"  paused: {pause['harness']} ({pause['condition']}) until {until}")
        left = state.get("rate_limit_remaining")
        if left is not None:
            lines.append(f"  GitHub rate limit: {left} requests left")
    return lines


def _clock_time(moment: Any) -> str:
    from datetime import UTC

    return str(moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))


@main.command("doctor")
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="OWNER/NAME",
    help="A repository to check too (repeatable; added to the repositories setting).",
)
@click.option(
    "--session",
    is_flag=True,
    help="Also run one tiny real session of each Harness (asks its model: costs a few cents).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per check, for scripts.")
def doctor_command(repos: tuple[str, ...], session: bool, as_json: bool) -> None:
    """Check that this machine is ready for a Run: settings, database, GitHub credentials and
    each repository's permission and labels, git, each Harness CLI, the agent sandbox, disk.

    One line per check (PASS, WARN, FAIL or SKIP), with the fix under each WARN and FAIL. Exit 0
    when nothing failed, 1 otherwise."""
    import json
    import os

    from thirdshift.bootstrap import run_doctor
    from thirdshift.doctor import Check, failed
    from thirdshift.settings import check_repository_name

    for repo in repos:
        try:
            check_repository_name(repo)
        except ValueError as error:
            raise click.UsageError(f"--repo: {error}") from None

    def report(check: Check) -> None:
        if as_json:
            click.echo(json.dumps(check.json()))
            return
        click.echo(f"{check.status}  {check.name}: {check.detail}")
        if check.fix:
            click.echo(f"      fix: {check.fix}")

    checks = run_doctor(
        repos, environ=dict(os.environ), report=report, progress=Progress(), session=session
    )
    if not as_json:
        failures = sum(check.status == "FAIL" for check in checks)
        warnings = sum(check.status == "WARN" for check in checks)
        click.echo(
            f"{failures} check(s) failed, {warnings} warning(s)"
            if failures or warnings
            else "every check passed"
        )
    sys.exit(1 if failed(checks) else 0)


def _open_store() -> tuple[Any, str]:
    """The settings' database, opened (and migrated); its URL for messages."""
    import os

    from thirdshift.settings import load_settings
    from thirdshift.store import Store

    settings = _guarded(lambda: load_settings(os.environ))
    url = settings.effective_database_url
    return _guarded(lambda: Store.open(url)), url


@main.command("runs")
@click.option("--repo", "repository", metavar="OWNER/NAME", help="Only this repository's Runs.")
@click.option(
    "--state",
    type=click.Choice(["running", "succeeded", "failed", "refused", "crashed"]),
    default=None,
    help="Only Runs in this state.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N Runs."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
def runs_command(repository: str | None, state: str | None, limit: int, as_json: bool) -> None:
    """Recent Runs, newest first, one line each."""
    import json

    from thirdshift.report import reading, shapes, views
    from thirdshift.settings import check_repository_name

    if repository is not None:
        try:
            check_repository_name(repository)
        except ValueError as error:
            raise click.UsageError(f"--repo: {error}") from None
    store, _ = _open_store()
    try:
        found = _guarded(
            lambda: reading.recent_runs(store, repository=repository, state=state, limit=limit)
        )
    finally:
        store.close()
    for run, total in found:
        _show(json.dumps(shapes.run_shape(run, total)) if as_json else views.run_line(run, total))
    if not found and not as_json:
        click.echo("no Runs recorded", err=True)


@main.command("show")
@click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def show_command(run_id: int, as_json: bool) -> None:
    """One Run whole: its record, Lease, sessions with their prompts, earlier Runs on its issue
    and its Activity lines."""
    import json

    from thirdshift.report import reading

    store, url = _open_store()
    try:
        view = _guarded(lambda: reading.run_view(store, run_id, url))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(view.shape()))
        return
    for line in view.lines():
        _show(line)


@main.command("logs")
@click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
@click.option(
    "--session",
    "kind",
    metavar="KIND",
    default=None,
    help="This Session kind's log (default: "
    "the Run's last session; the last of that kind when several).",
)
@click.option(
    "--follow", is_flag=True, help="Keep printing as the log grows, until the session ends."
)
@click.option("--raw", is_flag=True, help="The raw JSONL stream instead of condensed lines.")
def logs_command(run_id: int, kind: str | None, follow: bool, raw: bool) -> None:
    """A Run's Session log as condensed lines (the progress lines the Run printed), or raw."""
    import os

    from thirdshift.bootstrap import known_secrets
    from thirdshift.clock import SystemClock
    from thirdshift.errors import Interrupted
    from thirdshift.harnesses import harness_named
    from thirdshift.report import logs, reading
    from thirdshift.scrub import Scrubber
    from thirdshift.settings import load_settings

    settings = _guarded(lambda: load_settings(os.environ))
    scrub = Scrubber.from_environment(os.environ, known_secrets(os.environ))
    store, url = _open_store()
    interrupt = threading.Event()
    try:
        run = _guarded(lambda: reading.find_run(store, run_id, url))
        session = _guarded(lambda: logs.pick_session(run, store.run_sessions(run.id), kind))
        reader = None if raw else _guarded(lambda: harness_named(session.harness)).reader(scrub)
        worktree = settings.home / "worktrees" / f"{run.repository.owner}-{run.repository.name}-"
        condenser = logs.Condenser(
            session.kind,
            reader,
            worktree=f"{worktree}{run.issue_branch}" if run.issue_branch else None,
            scrub=scrub,
        )
        with _signals_set(interrupt, Progress(), quiet=True):
            try:
                logs.show_log(
                    session,
                    condenser,
                    _show,
                    rows=store if follow else None,
                    clock=SystemClock(interrupt) if follow else None,
                )
            except Interrupted:
                pass  # Ctrl-C ends a follow, as it ends tail -f: not a failure
            except ThirdshiftError as error:
                _fail(error)
    finally:
        store.close()


def sandbox_mode(settings: Any) -> str:
    """How agents would run: sealed by bubblewrap, or unsealed because the unsafe setting
    allows it; an error (exit 1) when neither."""
    import os

    from thirdshift.harnesses import probe

    return probe(
        os.environ.get("PATH"),
        unsafe_without=settings.unsafe_agent_without_sandbox,
        unsafe_network=settings.unsafe_agent_network,
    ).mode


@contextmanager
def _signals_set(
    interrupt: threading.Event,
    progress: Callable[[str], None],
    *,
    quiet: bool = False,
    until_exit: bool = False,
    what: str = "the work will be saved",
) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP set ``interrupt`` instead of killing the process: a Run stops its
    session and ends as a Failed run that saves its work; a server stops cleanly. A second
    signal changes nothing: saving must finish. Both handlers are installed explicitly, since a
    process started in the background inherits SIGINT ignored."""

    def _stop(signum: int, frame: FrameType | None) -> None:
        if not interrupt.is_set() and not quiet:
            progress(f"{signal.Signals(signum).name}: stopping; {what}")
        interrupt.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGHUP too: a closed terminal must save the work like Ctrl-C does.
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, _stop) for sig in stops}
    try:
        yield
    finally:
        if until_exit:
            # A second signal arriving after the salvage must not turn the Run's exit status
            # into a death by signal: Python restores the default handlers as it shuts down, so
            # from here to the exit these signals stay blocked (and are then discarded).
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        else:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@main.command("run")
@click.argument("issue_url", required=False)
@click.option(
    "--event",
    "event_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run the issue an issues event payload names (GitHub Actions: $GITHUB_EVENT_PATH), "
    "instead of an Issue URL.",
)
@click.option("--merge", is_flag=True, help="Self-merge the pull request once it is green.")
@click.option(
    "--harness",
    type=click.Choice(["claude", "codex"]),
    default=None,
    help="The Harness (default: the harness setting, claude).",
)
@click.option("--model", default=None, help="The Model the Harness uses.")
@click.option("--base", default=None, help="Base branch (default: the repository's default).")
def run_command(
    issue_url: str | None,
    event_path: Path | None,
    merge: bool,
    harness: str | None,
    model: str | None,
    base: str | None,
) -> None:
    """Take one issue to a ready (with --merge: merged) pull request, or end as a Failed run.

    Prints the pull request URL on stdout; progress on stderr. Exit 0 on success, 1 on failure,
    2 on a usage error, 3 when another Run holds the issue. With --event, an event that asks
    for no Run (another label, a reader's label, ...) ends with exit 0 and one line why."""
    import os

    from thirdshift.bootstrap import RunRequest, run_event, run_issue
    from thirdshift.errors import UsageError
    from thirdshift.issue_url import parse_issue_url
    from thirdshift.settings import load_settings, with_harness

    if (issue_url is None) == (event_path is None):
        raise click.UsageError("give an Issue URL or --event PATH (one of them)")
    ref = None
    if issue_url is not None:
        try:
            ref = parse_issue_url(issue_url)
        except UsageError as error:
            raise click.UsageError(str(error)) from None
    environ = dict(os.environ)
    settings = _guarded(lambda: load_settings(environ))
    settings = with_harness(settings, harness, model)
    # A live status line on a terminal; plain lines elsewhere, one-line ones on a runner.
    progress = progress_for(sys.stderr, environ)
    interrupt = threading.Event()
    with _signals_set(interrupt, progress, until_exit=True), _closing(progress):
        try:
            if ref is not None:
                status = run_issue(
                    settings,
                    RunRequest(issue=ref, merge=merge, base=base),
                    environ=environ,
                    progress=progress,
                    emit_url=_emit,
                    interrupt=interrupt,
                ).exit_code
            else:
                assert event_path is not None
                status = run_event(
                    settings,
                    event_path,
                    environ=environ,
                    progress=progress,
                    write=_command_line,
                    emit_url=_emit,
                    interrupt=interrupt,
                )
        except UsageError as error:
            raise click.UsageError(str(error)) from None
        except ThirdshiftError as error:
            _fail(error)
    sys.exit(status)


@main.command("architect")
@click.argument("repository", metavar="OWNER/NAME")
@click.option(
    "--focus",
    default=None,
    metavar="TEXT",
    help="What the review looks at first (a part of the code, a worry).",
)
@click.option("--base", default=None, help="Base branch (default: the repository's default).")
@click.option(
    "--harness",
    type=click.Choice(["claude", "codex"]),
    default=None,
    help="The Harness (default: the harness setting, claude).",
)
@click.option("--model", default=None, help="The Model the Harness uses.")
def architect_command(
    repository: str, focus: str | None, base: str | None, harness: str | None, model: str | None
) -> None:
    """Review the repository for its single best deepening opportunity and publish it for
    people to triage: a Spec with Tickets (or one Ticket) labelled architect-plan and
    needs-triage, or an idea labelled architect-idea; nothing when an issue already covers it.

    Skipped (exit 0, one line why, the URL of what blocks it on stdout) while an Architect
    plan is open, an Architect idea waits for triage, a Ready issue exists, or the weekly cap
    is reached. Prints the published issue's URL on stdout. Exit 0 published, covered or
    skipped; 1 failed (nothing more published); 2 usage error; 3 another Architect run works on
    the repository."""
    import os

    from thirdshift.bootstrap import run_architect
    from thirdshift.runs import ArchitectRequest
    from thirdshift.settings import check_repository_name, load_settings, with_harness

    try:
        owner, name = check_repository_name(repository)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    environ = dict(os.environ)
    settings = _guarded(lambda: load_settings(environ))
    settings = with_harness(settings, harness, model)
    progress = progress_for(sys.stderr, environ)
    interrupt = threading.Event()
    with _signals_set(interrupt, progress, until_exit=True), _closing(progress):
        try:
            status = run_architect(
                settings,
                ArchitectRequest(owner=owner, name=name, focus=focus, base=base),
                environ=environ,
                progress=progress,
                emit_url=_emit,
                interrupt=interrupt,
            ).exit_code
        except ThirdshiftError as error:
            _fail(error)
    sys.exit(status)


@contextmanager
def _closing(progress: Progress | LiveProgress) -> Iterator[None]:
    """Take the live status line away when the command ends, however it ends."""
    try:
        yield
    finally:
        if isinstance(progress, LiveProgress):
            progress.close()


def _command_line(line: str) -> None:
    """A workflow command for the Actions runner, on stderr beside the progress lines."""
    with suppress(OSError, ValueError):
        click.echo(line, err=True)


@main.group()
def actions() -> None:
    """GitHub Actions: a labelled issue starts a Run on a runner."""


@actions.command("init")
@click.option(
    "--path",
    "root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The repository's checkout; the workflow goes to .github/workflows/thirdshift.yml.",
)
@click.option(
    "--install",
    default=None,
    help="What the workflow gives pip to install thirdshift (default: thirdshift at this version).",
)
@click.option("--harness", type=click.Choice(["claude", "codex"]), default="claude")
@click.option("--force", is_flag=True, help="Replace a workflow file that is already there.")
def actions_init(root: Path, install: str | None, harness: str, force: bool) -> None:
    """Write the workflow that runs thirdshift on each issue labelled ready-for-agent. Prints
    the file's path on stdout."""
    import os

    from thirdshift.actions.workflow import (
        HOSTED_JOB_LIMIT_MINUTES,
        WorkflowChoices,
        fitted,
        workflow_text,
    )
    from thirdshift.settings import load_settings

    settings = _guarded(lambda: load_settings(dict(os.environ)))
    target = root / ".github" / "workflows" / "thirdshift.yml"
    if target.exists() and not force:
        _fail(ThirdshiftError(f"{target} already exists; pass --force to replace it"))
    asked = WorkflowChoices(
        install=install or f"thirdshift=={__version__}",
        harness=harness,
        ready_label=settings.ready_label,
        in_progress_label=settings.in_progress_label,
        session_wall_seconds=settings.session_wall_seconds,
        ci_timeout_seconds=settings.ci_timeout_seconds,
    )
    choices = fitted(asked)
    if choices != asked:
        click.echo(
            f"note: a session may last {format_duration(asked.session_wall_seconds)} and CI "
            f"{format_duration(asked.ci_timeout_seconds)}, more than a GitHub-hosted job's "
            f"{HOSTED_JOB_LIMIT_MINUTES // 60} hours; the workflow lowers them to "
            f"{format_duration(choices.session_wall_seconds)} and "
            f"{format_duration(choices.ci_timeout_seconds)} (THIRDSHIFT_SESSION_WALL_SECONDS, "
            "THIRDSHIFT_CI_TIMEOUT_SECONDS in the file; on a self-hosted runner raise them and "
            "timeout-minutes together)",
            err=True,
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(workflow_text(choices), encoding="utf-8")
    except OSError as error:
        _fail(ThirdshiftError(f"cannot write {target}: {error.strerror}"))
    click.echo(str(target))


@main.command("daemon")
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="OWNER/NAME",
    help="A repository to watch (repeatable; added to the repositories setting).",
)
@click.option(
    "--once",
    is_flag=True,
    help="Poll each repository once, run what is Ready, wait for those Runs, and exit.",
)
@click.option(
    "--http",
    metavar="HOST:PORT",
    help=(
        "Serve the read-only status page there, behind http_token or a token made at start "
        "and printed with the page's address (beyond loopback, http_token is required)."
    ),
)
def daemon_command(repos: tuple[str, ...], once: bool, http: str | None) -> None:
    """Watch repositories for Ready issues and run each exactly once, side by side within the
    limits, until SIGTERM or Ctrl-C (then the running Runs save their work and it exits 0).

    Progress and the Activity log on stderr. With --once: exit 0 when every poll and Run
    succeeded, 1 otherwise."""
    import os

    from thirdshift.bootstrap import run_daemon
    from thirdshift.errors import UsageError
    from thirdshift.settings import check_repository_name, load_settings

    for repo in repos:
        try:
            check_repository_name(repo)
        except ValueError as error:
            raise click.UsageError(f"--repo: {error}") from None
    environ = dict(os.environ)
    settings = _guarded(lambda: load_settings(environ))
    progress = Progress()
    stop = threading.Event()
    with _signals_set(stop, progress, until_exit=True, what="the running Runs will be saved"):
        try:
            status = run_daemon(
                settings,
                repositories=repos,
                once=once,
                http=http,
                environ=environ,
                progress=progress,
                stop=stop,
            )
        except UsageError as error:
            raise click.UsageError(str(error)) from None
        except ThirdshiftError as error:
            _fail(error)
    sys.exit(status)


@main.group()
def sandbox() -> None:
    """Local stand-ins for GitHub and a model provider, for tests and the demo."""


@sandbox.command("serve")
@click.option(
    "--root",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the bare repositories and CI checkouts (created if missing).",
)
@click.option("--port", default=0, show_default="a free port", help="Port on 127.0.0.1.")
def sandbox_serve(root: Path, port: int) -> None:
    """Serve the GitHub stand-in; print its API URL on stdout once it is ready."""
    from thirdshift.sandbox.github.server import GitHubStandIn

    progress = Progress()
    root.mkdir(parents=True, exist_ok=True)
    interrupt = threading.Event()
    with _signals_set(interrupt, progress, quiet=True):
        stand_in = GitHubStandIn(root, port=port)
        _guarded(stand_in.start)
        try:
            click.echo(stand_in.api_url)
            wait_for_interrupt(progress, f"GitHub stand-in serving {stand_in.api_url}", interrupt)
        finally:
            stand_in.stop()


@sandbox.command("model")
@click.option(
    "--script",
    "script_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The script of sessions and turns to play (see docs/model-script.md).",
)
@click.option("--port", default=0, show_default="a free port", help="Port on 127.0.0.1.")
@click.option(
    "--request-log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to record every request as a JSON line (default: beside the script).",
)
def sandbox_model(script_path: Path, port: int, request_log: Path | None) -> None:
    """Serve the scripted model server; print its base URL on stdout once it is ready."""
    from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer

    progress = Progress()
    script = _guarded(lambda: ModelScript.load(script_path))
    log = request_log or script_path.with_suffix(".requests.jsonl")
    interrupt = threading.Event()
    with _signals_set(interrupt, progress, quiet=True):
        server = ScriptedModelServer(script, log, port=port)
        _guarded(server.start)
        try:
            click.echo(server.url)
            wait_for_interrupt(progress, f"scripted model server serving {server.url}", interrupt)
        finally:
            server.stop()


@main.command("demo")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the demo's servers and files (default: a new temporary directory).",
)
@click.option("--keep", is_flag=True, help="Keep both servers running after the Run, until Ctrl-C.")
def demo_command(root: Path | None, keep: bool) -> None:
    """Start both sandbox servers with a demo repository and a Ready issue, and run thirdshift on
    it with the real Claude Code CLI. Prints the pull request URL on stdout; exit status as for
    `thirdshift run`."""
    from thirdshift.sandbox.demo import run_demo

    progress = Progress()
    interrupt = threading.Event()
    with _signals_set(interrupt, progress):
        status = _guarded(
            lambda: run_demo(
                root,
                progress,
                interrupt,
                emit_url=_emit,
                keep=(lambda what: wait_for_interrupt(progress, what, interrupt)) if keep else None,
            )
        )
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    main()
