"""The sandbox's commands: ``sandbox serve`` (the GitHub stand-in), ``sandbox model`` (the
scripted model server) and ``demo`` (both, with a Run on a demo issue). Only these commands
import ``thirdshift.sandbox``."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

import click

from thirdshift.cli.common import emit, guarded, signals_set, wait_for_interrupt
from thirdshift.console import Progress
from thirdshift.harness_registry import DEFAULT_HARNESS, HARNESS_NAMES


@click.group()
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

    root.mkdir(parents=True, exist_ok=True)
    _serve(lambda: GitHubStandIn(root, port=port), lambda server: server.api_url, "GitHub stand-in")


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

    script = guarded(lambda: ModelScript.load(script_path))
    log = request_log or script_path.with_suffix(".requests.jsonl")
    _serve(
        lambda: ScriptedModelServer(script, log, port=port),
        lambda server: server.url,
        "scripted model server",
    )


class _Server(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


Server = TypeVar("Server", bound=_Server)


def _serve(build: Callable[[], Server], address: Callable[[Server], str], what: str) -> None:
    """Start the server, print its address on stdout and serve until Ctrl-C or SIGTERM."""
    progress = Progress()
    interrupt = threading.Event()
    with signals_set(interrupt, progress, quiet=True):
        server = build()
        guarded(server.start)
        try:
            url = address(server)
            click.echo(url)
            wait_for_interrupt(progress, f"{what} serving {url}", interrupt)
        finally:
            server.stop()


@click.command("demo")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the demo's servers and files (default: a new temporary directory).",
)
@click.option(
    "--run",
    "single_run",
    is_flag=True,
    help="Show one `thirdshift run` on one issue instead of the daemon at work.",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep going after the last issue is done (the daemon, or with --run both servers), "
    "until Ctrl-C.",
)
@click.option(
    "--harness",
    type=click.Choice(HARNESS_NAMES),
    default=DEFAULT_HARNESS,
    show_default=True,
    help="The Harness whose real CLI runs the demo's sessions.",
)
def demo_command(root: Path | None, single_run: bool, keep: bool, harness: str) -> None:
    """Start both sandbox servers, a demo repository with Ready issues and `thirdshift daemon`
    with its status page (its URL printed first), until every issue has its pull request; then
    a summary table on stdout. With --run: one `thirdshift run` on one issue, its pull request
    URL on stdout, exit status as for `thirdshift run`."""
    progress = Progress()
    interrupt = threading.Event()
    with signals_set(interrupt, progress):
        if single_run:
            status = guarded(lambda: _single_run(root, keep, harness, progress, interrupt))
        else:
            from thirdshift.sandbox.demo_daemon import DaemonDemoSetup, run_daemon_demo

            setup = DaemonDemoSetup(root=root, harness=harness, keep=keep)
            status = guarded(lambda: run_daemon_demo(setup, progress, interrupt, emit=emit))
    sys.exit(status)


def _single_run(
    root: Path | None, keep: bool, harness: str, progress: Progress, interrupt: threading.Event
) -> int:
    from thirdshift.sandbox.demo import run_demo

    return run_demo(
        root,
        progress,
        interrupt,
        emit_url=emit,
        keep=(lambda what: wait_for_interrupt(progress, what, interrupt)) if keep else None,
        harness=harness,
    )
