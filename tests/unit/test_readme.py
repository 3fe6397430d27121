"""The README against the command: every command the CLI has, each of its options and the lines
a user sees from `status` and `logs` are documented where a reader of that command looks."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest

from thirdshift.cli import main
from thirdshift.cli.status import status_lines
from thirdshift.errors import NotRecorded
from thirdshift.records import Repository, Run, SessionRecord, Usage
from thirdshift.report.logs import pick_session

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[
    tuple[tuple[str, ...], click.Command]
]:  # fmt: skip
    """Every command a user can run, as its words after ``thirdshift``."""
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def sections(words: tuple[str, ...]) -> str:
    """The README's sections headed ``### `thirdshift <words> ...```, joined."""
    heading = re.escape("### `thirdshift " + " ".join(words))
    found = re.findall(rf"^{heading}[ `].*?(?=^##)", README, re.M | re.S)
    return "\n".join(found)


def options(command: click.Command) -> Iterator[str]:
    for parameter in command.params:
        if isinstance(parameter, click.Option):
            yield from (opt for opt in [*parameter.opts, *parameter.secondary_opts])


LEAVES = sorted(commands(main))


@pytest.mark.parametrize(("words", "command"), LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_each_command_has_a_readme_section_naming_each_of_its_options(
    words: tuple[str, ...], command: click.Command
) -> None:
    documented = sections(words)
    assert documented, f"README.md has no section '### `thirdshift {' '.join(words)} ...`'"
    missing = [opt for opt in options(command) if not re.search(rf"`[^`]*{opt}\b", documented)]
    assert missing == [], f"thirdshift {' '.join(words)}: README does not document {missing}"


def test_the_readme_walk_finds_every_command() -> None:
    """The walk above is not vacuous: it reaches the nested commands too."""
    names = {" ".join(words) for words, _ in LEAVES}
    assert {"run", "daemon", "status", "sandbox serve", "actions init"} <= names


def test_the_options_of_the_command_itself_are_documented() -> None:
    commands_section = README.split("## Commands", 1)[1].split("\n### ", 1)[0]
    for opt in [*options(main), "-h"]:
        assert f"`thirdshift {opt}`" in commands_section or f"`{opt}`" in commands_section, opt


def shown(text: str) -> str:
    """``text`` as the README's prose holds it: on one line, code spans unmarked."""
    return " ".join(text.replace("`", "").split())


def test_the_lines_status_prints_are_in_the_readme() -> None:
    now = datetime.now(UTC)
    stopping = {
        "daemon": "night-1", "pid": os.getpid(), "started_at": now.isoformat(),
        "updated_at": now.isoformat(), "stopping": True, "repositories": [], "running": [],
        "pauses": [],
    }  # fmt: skip
    [nobody] = status_lines([], now)
    [saving] = status_lines([stopping], now)

    assert shown(nobody) in shown(README)
    assert "stopping, saving its Runs since" in saving
    assert "stopping, saving its Runs since" in shown(README)
    for line in ("Leases held: none", "Runs running: none", "Passed over in the last day: none"):
        assert line in shown(README)


def session(number: int, kind: str) -> SessionRecord:
    return SessionRecord(
        id=number, run_id=3, kind=kind, harness="claude", model=None, harness_session_id=None,
        resumed_from_id=None, log_path="x.jsonl", state="ended", prompt="", final_message=None,
        killed_work=None, error=None, started_at=datetime.now(UTC), ended_at=None, usage=Usage(),
    )  # fmt: skip


def test_the_lines_logs_prints_for_a_missing_session_are_in_the_readme() -> None:
    run = Run(
        id=3, repository=Repository(1, "acme", "widgets"), issue_number=7, kind="run",
        state="failed", base_branch="main", issue_branch="issue-7", head_sha=None,
        pull_request_number=None, harness="claude", model=None, cause=None, killed_work=None,
        last_session_log=None, started_at=datetime.now(UTC), ended_at=None,
    )  # fmt: skip
    sessions = [session(1, "implement"), session(2, "implement-resume")]

    for given in (sessions, []):
        with pytest.raises(NotRecorded) as missing:
            pick_session(run, given, "repair-1")
        assert shown(str(missing.value)) in shown(README)
