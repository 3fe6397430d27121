"""The commands that read what the database recorded: ``runs``, ``show``, ``logs``, ``usage``
and ``report``."""

from __future__ import annotations

import threading

import click

from thirdshift.cli.common import (
    check_repositories,
    fail,
    guarded,
    reported,
    show,
    signals_set,
)
from thirdshift.console import Progress
from thirdshift.errors import ThirdshiftError
from thirdshift.run_states import RunState


@click.command("usage")
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

    from thirdshift.bootstrap import usage_totals
    from thirdshift.console import format_duration
    from thirdshift.report import shapes

    check_repositories([] if repository is None else [repository])
    totals = guarded(lambda: usage_totals(os.environ, group, days=days, repository=repository))
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


@click.command("report")
@click.option(
    "--since",
    metavar="WHEN",
    default=None,
    help="Only Runs started since WHEN: a date (2026-11-01, UTC) or a duration back from now "
    "(7d, 12h). Default: the last 30 days.",
)
@click.option("--repo", "repository", metavar="OWNER/NAME", help="Only this repository's Runs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def report_command(since: str | None, repository: str | None, as_json: bool) -> None:
    """How the Runs went, per repository and Harness: outcomes, pull requests, Failed runs by
    cause, Repairs, cost per Run and per pull request, session and label-to-ready times."""
    import json
    import os

    from thirdshift.bootstrap import period_report
    from thirdshift.report import shapes, tables

    check_repositories([] if repository is None else [repository])
    with reported():
        report = period_report(os.environ, since=since, repository=repository)
    if as_json:
        click.echo(json.dumps(shapes.report_shape(report)))
        return
    for line in tables.report_lines(report):
        show(line)


@click.command("runs")
@click.option("--repo", "repository", metavar="OWNER/NAME", help="Only this repository's Runs.")
@click.option(
    "--state",
    type=click.Choice([state.value for state in RunState]),
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
    import os

    from thirdshift.bootstrap import recent_runs
    from thirdshift.report import shapes, views

    check_repositories([] if repository is None else [repository])
    found = guarded(
        lambda: recent_runs(
            os.environ,
            repository=repository,
            state=None if state is None else RunState(state),
            limit=limit,
        )
    )
    for run, total in found:
        show(json.dumps(shapes.run_shape(run, total)) if as_json else views.run_line(run, total))
    if not found and not as_json:
        click.echo("no Runs recorded", err=True)


@click.command("show")
@click.argument("run_id", metavar="RUN", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def show_command(run_id: int, as_json: bool) -> None:
    """One Run whole: its record, Lease, sessions with their prompts, earlier Runs on its issue
    and its Activity lines."""
    import json
    import os

    from thirdshift.bootstrap import run_view

    view = guarded(lambda: run_view(os.environ, run_id))
    if as_json:
        click.echo(json.dumps(view.shape()))
        return
    for line in view.lines():
        show(line)


@click.command("logs")
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

    from thirdshift.bootstrap import follow_clock, log_reader, open_store, reading_scrubber
    from thirdshift.errors import Interrupted
    from thirdshift.home import Home
    from thirdshift.report import logs, reading

    scrub = reading_scrubber(os.environ)
    opened = guarded(lambda: open_store(os.environ))
    settings, store = opened.settings, opened.store
    interrupt = threading.Event()
    with opened:
        run = guarded(lambda: reading.find_run(store, run_id, settings.effective_database_url))
        session = guarded(lambda: logs.pick_session(run, store.run_sessions(run.id), kind))
        reader = None if raw else guarded(lambda: log_reader(session.harness, scrub))
        owner, name, branch = run.repository.owner, run.repository.name, run.issue_branch
        worktree = str(Home(settings.home).worktree(owner, name, branch)) if branch else None
        condenser = logs.Condenser(
            session.kind,
            reader,
            worktree=worktree,
            scrub=scrub,
        )
        with signals_set(interrupt, Progress(), quiet=True):
            try:
                logs.show_log(
                    session,
                    condenser,
                    show,
                    rows=store if follow else None,
                    clock=follow_clock(interrupt) if follow else None,
                )
            except Interrupted:
                pass  # Ctrl-C ends a follow, as it ends tail -f: not a failure
            except ThirdshiftError as error:
                fail(error)
