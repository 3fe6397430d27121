"""The commands that check this machine: ``config`` (the settings and the database) and
``doctor`` (everything a Run needs)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from thirdshift.cli.common import check_repositories, guarded
from thirdshift.console import Progress

if TYPE_CHECKING:
    from collections.abc import Sequence

    from thirdshift.doctor import Check


@click.command("config")
def config_command() -> None:
    """Check the configuration and the database, and show the settings in force (the token is
    never shown)."""
    import os

    from thirdshift.bootstrap import (
        checked_settings,
        model_key_place,
        sandbox_mode,
        session_bounds,
    )
    from thirdshift.store import redact_url

    settings = guarded(lambda: checked_settings(os.environ))
    click.echo(f"home: {settings.home}")
    click.echo(f"database: {redact_url(settings.effective_database_url)}")
    click.echo(f"github api: {settings.github_api_url}")
    click.echo(f"github token: {'set' if settings.github_token else 'not set'}")
    if settings.github_app_id is not None:
        # The App wins over the token: its installation tokens are what thirdshift acts with.
        click.echo(f"github app: {settings.github_app_id} (its installation tokens act)")
    click.echo(f"agent sandbox: {guarded(lambda: sandbox_mode(settings, os.environ))}")
    click.echo(f"model key: {model_key_place(settings)}")
    click.echo(f"session limits: {guarded(lambda: session_bounds(settings))}")
    reach = " and ".join(
        filter(None, ["its model provider", ", ".join(settings.agent_network_allow)])
    )
    if settings.agent_network_allow_by_repository:
        reach += f" (more for {len(settings.agent_network_allow_by_repository)} repositories)"
    click.echo(f"agent network: {reach}")


@click.command("doctor")
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
    from thirdshift.doctor import failed

    check_repositories(repos)

    def report(check: Check) -> None:
        if as_json:
            click.echo(json.dumps(check.json()))
            return
        show_check(check)

    checks = run_doctor(
        repos, environ=dict(os.environ), report=report, progress=Progress(), session=session
    )
    if not as_json:
        click.echo(closing_line(checks))
    sys.exit(1 if failed(checks) else 0)


def show_check(check: Check) -> None:
    """One check as ``doctor`` prints it: its line, and its fix under it."""
    click.echo(f"{check.status}  {check.name}: {check.detail}")
    if check.fix:
        click.echo(f"      fix: {check.fix}")


def closing_line(checks: Sequence[Check]) -> str:
    """The count of failures and warnings, or that every check passed."""
    failures = sum(check.status == "FAIL" for check in checks)
    warnings = sum(check.status == "WARN" for check in checks)
    if failures or warnings:
        return f"{failures} check(s) failed, {warnings} warning(s)"
    return "every check passed"
