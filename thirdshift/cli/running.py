"""The commands that do the work: ``run`` (one issue), ``architect`` (one review of a
repository) and ``daemon`` (Ready issues, as they come)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from thirdshift.cli.common import (
    check_owners,
    check_repositories,
    closing,
    command_line,
    emit,
    fail,
    guarded,
    reported,
    signals_set,
)
from thirdshift.console import LiveProgress, Progress, progress_for
from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import HARNESS_NAMES

if TYPE_CHECKING:
    from thirdshift.settings import Settings

Command = TypeVar("Command", bound=Callable[..., object])


def harness_options(command: Command) -> Command:
    """``--harness`` and ``--model``, which override the settings for this one command."""
    command = click.option("--model", default=None, help="The Model the Harness uses.")(command)
    return click.option(
        "--harness",
        type=click.Choice(list(HARNESS_NAMES)),
        default=None,
        help="The Harness (default: the harness setting, claude).",
    )(command)


def _set_up(
    harness: str | None, model: str | None
) -> tuple[dict[str, str], Settings, Progress | LiveProgress]:
    """The environment, read once; the settings with this command's Harness and Model; and the
    progress: a live status line on a terminal, plain lines elsewhere, one-line ones on a
    runner."""
    import os

    from thirdshift.settings import load_settings, with_harness

    environ = dict(os.environ)
    settings = with_harness(guarded(lambda: load_settings(environ)), harness, model)
    return environ, settings, progress_for(sys.stderr, environ)


@click.command("run")
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
@harness_options
@click.option("--base", default=None, help="Base branch (default: the repository's default).")
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="A Spec (an issue with sub-issues): run up to N Tickets at once (default: the "
    "spec_parallel setting, 3).",
)
def run_command(
    issue_url: str | None,
    event_path: Path | None,
    merge: bool,
    harness: str | None,
    model: str | None,
    base: str | None,
    parallel: int | None,
) -> None:
    """Take one issue to a ready (with --merge: merged) pull request, or end as a Failed run.

    An issue with sub-issues is a Spec: its Tickets run as Merge runs into one Spec branch,
    then its Spec PR into the Base branch is reviewed and made ready.

    Prints the pull request URL on stdout; progress on stderr. Exit 0 on success, 1 on failure,
    2 on a usage error, 3 when another Run holds the issue. With --event, an event that asks
    for no Run (another label, a reader's label, ...) ends with exit 0 and one line why."""
    from thirdshift.bootstrap import RunRequest, run_event, run_issue
    from thirdshift.errors import UsageError
    from thirdshift.issue_url import parse_issue_url

    if (issue_url is None) == (event_path is None):
        raise click.UsageError("give an Issue URL or --event PATH (one of them)")
    if parallel is not None and event_path is not None:
        raise click.UsageError("--parallel runs a Spec given by its Issue URL, not with --event")
    ref = None
    if issue_url is not None:
        try:
            ref = parse_issue_url(issue_url)
        except UsageError as error:
            raise click.UsageError(str(error)) from None
    environ, settings, progress = _set_up(harness, model)
    interrupt = threading.Event()
    with signals_set(interrupt, progress, until_exit=True), closing(progress), reported():
        if ref is not None:
            status = run_issue(
                settings,
                RunRequest(issue=ref, merge=merge, base=base),
                environ=environ,
                progress=progress,
                emit_url=emit,
                interrupt=interrupt,
                specs=True,
                parallel=parallel,
            ).exit_code
        else:
            assert event_path is not None
            status = run_event(
                settings,
                event_path,
                environ=environ,
                progress=progress,
                write=command_line,
                emit_url=emit,
                interrupt=interrupt,
            )
    sys.exit(status)


@click.command("architect")
@click.argument("repository", metavar="OWNER/NAME")
@click.option(
    "--focus",
    default=None,
    metavar="TEXT",
    help="What the review looks at first (a part of the code, a worry).",
)
@click.option("--base", default=None, help="Base branch (default: the repository's default).")
@harness_options
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
    from thirdshift.bootstrap import run_architect
    from thirdshift.runs import ArchitectRequest
    from thirdshift.settings import check_repository_name

    try:
        owner, name = check_repository_name(repository)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    environ, settings, progress = _set_up(harness, model)
    interrupt = threading.Event()
    with signals_set(interrupt, progress, until_exit=True), closing(progress):
        try:
            status = run_architect(
                settings,
                ArchitectRequest(owner=owner, name=name, focus=focus, base=base),
                environ=environ,
                progress=progress,
                emit_url=emit,
                interrupt=interrupt,
            ).exit_code
        except ThirdshiftError as error:
            fail(error)
    sys.exit(status)


@click.command("daemon")
@click.option(
    "--repo",
    "repos",
    multiple=True,
    metavar="OWNER/NAME",
    help="A repository to watch (repeatable; added to the repositories setting).",
)
@click.option(
    "--owner",
    "owners",
    multiple=True,
    metavar="OWNER",
    help="A user or organisation whose every repository the token may push to is watched "
    "(repeatable; added to the owners setting).",
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
@harness_options
def daemon_command(
    repos: tuple[str, ...],
    owners: tuple[str, ...],
    once: bool,
    http: str | None,
    harness: str | None,
    model: str | None,
) -> None:
    """Watch repositories for Ready issues and run each exactly once, side by side within the
    limits, until SIGTERM or Ctrl-C (then the running Runs save their work and it exits 0).

    Progress and the Activity log on stderr. With --once: exit 0 when every poll and Run
    succeeded, 1 otherwise."""
    import os

    from thirdshift.bootstrap import run_daemon
    from thirdshift.settings import load_settings, with_harness

    check_repositories(repos)
    check_owners(owners)
    environ = dict(os.environ)
    settings = with_harness(guarded(lambda: load_settings(environ)), harness, model)
    progress = Progress()
    stop = threading.Event()
    with (
        signals_set(stop, progress, until_exit=True, what="the running Runs will be saved"),
        reported(),
    ):
        status = run_daemon(
            settings,
            repositories=repos,
            owners=owners,
            once=once,
            http=http,
            environ=environ,
            progress=progress,
            stop=stop,
        )
    sys.exit(status)
