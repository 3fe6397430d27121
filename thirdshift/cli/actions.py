"""``thirdshift actions``: GitHub Actions, where a labelled issue starts a Run on a runner."""

from __future__ import annotations

from pathlib import Path

import click

from thirdshift import __version__
from thirdshift.cli.common import fail, guarded
from thirdshift.console import format_duration
from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import DEFAULT_HARNESS, HARNESS_NAMES


@click.group()
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
@click.option("--harness", type=click.Choice(list(HARNESS_NAMES)), default=DEFAULT_HARNESS)
@click.option("--force", is_flag=True, help="Replace a workflow file that is already there.")
def actions_init(root: Path, install: str | None, harness: str, force: bool) -> None:
    """Write the workflow that runs thirdshift on each issue labelled ready-for-agent, and the
    Harness CLI's npm lock beside it (.github/thirdshift/). Prints the workflow's path on
    stdout."""
    import os

    from thirdshift.actions.workflow import (
        HOSTED_JOB_LIMIT_MINUTES,
        WorkflowChoices,
        fitted,
        workflow_text,
    )
    from thirdshift.settings import load_settings

    settings = guarded(lambda: load_settings(dict(os.environ)))
    target = root / ".github" / "workflows" / "thirdshift.yml"
    files = {target: "", **_lock_files(root, harness)}
    existing = [path for path in files if path.exists()]
    if existing and not force:
        fail(ThirdshiftError(f"{existing[0]} already exists; pass --force to replace it"))
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
    files[target] = guarded(lambda: workflow_text(choices))
    for path, text in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            fail(ThirdshiftError(f"cannot write {path}: {error.strerror}"))
    click.echo(str(target))


def _lock_files(root: Path, harness: str) -> dict[Path, str]:
    """The Harness CLI's npm project beside the workflow, which installs it with ``npm ci``."""
    from thirdshift.actions.pins import LOCK_DIRECTORY, harness_lock, harness_manifest
    from thirdshift.harness_registry import harness_entry

    entry = harness_entry(harness)
    directory = root / LOCK_DIRECTORY
    return {
        directory / "package.json": harness_manifest(entry),
        directory / "package-lock.json": guarded(lambda: harness_lock(entry)),
    }
