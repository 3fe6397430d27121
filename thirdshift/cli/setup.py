"""``thirdshift setup``: a repository made ready for thirdshift in one command."""

from __future__ import annotations

import sys

import click

from thirdshift.cli.checks import closing_line, show_check
from thirdshift.cli.common import check_repositories, guarded
from thirdshift.console import Progress


@click.command("setup")
@click.option(
    "--repo",
    "repository",
    required=True,
    metavar="OWNER/NAME",
    help="The repository thirdshift is to work on.",
)
def setup_command(repository: str) -> None:
    """Make a repository ready: write the configuration file (every setting at its default,
    commented out; an existing file is edited in place, keeping what you wrote) listing the
    repository, create the labels thirdshift uses there (those missing), then run the doctor's
    checks. Exit 0 when no check failed, 1 otherwise."""
    import os

    from thirdshift.bootstrap import run_setup
    from thirdshift.doctor import failed

    check_repositories([repository])
    checks = guarded(
        lambda: run_setup(
            repository, environ=dict(os.environ), report=show_check, progress=Progress()
        )
    )
    click.echo(closing_line(checks))
    sys.exit(1 if failed(checks) else 0)
