"""The ``thirdshift`` command: its group and the commands it holds, one module per kind.

stdout carries data only (URLs); stderr carries timestamped progress and errors. Exit status 0
on success, 1 on failure (any ThirdshiftError), 2 on a usage error.

``running`` does the work (``run``, ``architect``, ``daemon``); ``status``, ``history``
(``runs``, ``show``, ``logs``, ``usage``, ``report``) and ``checks`` (``config``, ``doctor``)
are what operators read; ``setup`` makes a repository ready; ``actions`` sets up GitHub
Actions; ``sandbox`` holds the test worlds' commands and the demo. ``common`` is what they
share: exits, output, signals. The adapters are built by ``thirdshift.bootstrap``, the composition
root.
"""

from __future__ import annotations

import click

from thirdshift import __version__
from thirdshift.cli.actions import actions
from thirdshift.cli.checks import config_command, doctor_command
from thirdshift.cli.history import (
    logs_command,
    report_command,
    runs_command,
    show_command,
    usage_command,
)
from thirdshift.cli.running import architect_command, daemon_command, run_command
from thirdshift.cli.sandbox import demo_command, sandbox
from thirdshift.cli.setup import setup_command
from thirdshift.cli.status import status_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="thirdshift")
def main() -> None:
    """Turn GitHub issues labelled ready-for-agent into pull requests thirdshift stands behind."""


for _command in (
    actions,
    architect_command,
    config_command,
    daemon_command,
    demo_command,
    doctor_command,
    logs_command,
    report_command,
    run_command,
    runs_command,
    sandbox,
    setup_command,
    show_command,
    status_command,
    usage_command,
):
    main.add_command(_command)

__all__ = ["main"]
