"""The documentation against the command: every command the CLI has, each of its options and the
lines a user sees from `status` and `logs` are documented on the docs page a reader of that
command looks at; the generated references name every command, option and setting."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
import yaml

from thirdshift.cli import main
from thirdshift.cli.reference import (
    CommandEntry,
    command_entries,
    command_reference,
    option_names,
    setting_variables,
    settings_reference,
)
from thirdshift.cli.status import status_lines
from thirdshift.errors import NotRecorded
from thirdshift.records import Repository, Run, SessionRecord, Usage
from thirdshift.report.logs import pick_session
from thirdshift.run_states import RunKind, RunState
from thirdshift.settings import ModelPrice, Settings

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = {path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))}
OPERATING = PAGES["operating.md"]


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


def sections(words: tuple[str, ...], text: str, level: str = "##") -> str:
    """The sections of ``text`` headed ``<level> `thirdshift <words> ...```, joined; each runs
    to the next heading of level two or deeper, or to the end of the page."""
    heading = re.escape(f"{level} `thirdshift " + " ".join(words))
    found = re.findall(rf"^{heading}[ `].*?(?=^##|\Z)", text, re.M | re.S)
    return "\n".join(found)


LEAVES = sorted(commands(main))


@pytest.mark.parametrize(("words", "command"), LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_each_command_has_a_docs_section_naming_each_of_its_options(
    words: tuple[str, ...], command: click.Command
) -> None:
    """Each command has a section ``## `thirdshift <words> ...``` on a page of docs/ that names
    every option it takes."""
    documented = "\n".join(sections(words, text) for text in PAGES.values()).strip()
    assert documented, f"docs/ has no section '## `thirdshift {' '.join(words)} ...`'"
    missing = [o for o in option_names(command) if not re.search(rf"`[^`]*{o}\b", documented)]
    assert missing == [], f"thirdshift {' '.join(words)}: docs/ does not document {missing}"


def test_the_docs_walk_finds_every_command() -> None:
    """The walk above is not vacuous: it reaches the nested commands too."""
    names = {" ".join(words) for words, _ in LEAVES}
    assert {"run", "daemon", "status", "sandbox serve", "actions init"} <= names


def test_a_section_ends_at_the_next_heading_or_the_end_of_its_page() -> None:
    """The section finder neither runs into the next section nor misses a page's last one."""
    page = "## `thirdshift a [--x]`\n`--x`\n## `thirdshift b`\n`--y`\n"
    assert sections(("a",), page) == "## `thirdshift a [--x]`\n`--x`\n"
    assert sections(("b",), page) == "## `thirdshift b`\n`--y`\n"
    assert sections(("c",), page) == ""


def test_the_options_of_the_command_itself_are_documented() -> None:
    """`thirdshift --version` and `-h`/`--help` are on the Commands page."""
    commands_section = PAGES["commands.md"].split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    for opt in [*option_names(main), "-h"]:
        assert f"`thirdshift {opt}`" in commands_section or f"`{opt}`" in commands_section, opt


def shown(text: str) -> str:
    """``text`` as the docs' prose holds it: on one line, code spans unmarked."""
    return " ".join(text.replace("`", "").split())


def test_the_lines_status_prints_are_on_the_operating_page() -> None:
    """What `status` prints with no daemon, and for a stopping one, is documented with it."""
    now = datetime.now(UTC)
    stopping = {
        "daemon": "night-1", "pid": os.getpid(), "started_at": now.isoformat(),
        "updated_at": now.isoformat(), "stopping": True, "repositories": [], "running": [],
        "pauses": [],
    }  # fmt: skip
    [nobody] = status_lines([], now)
    [saving] = status_lines([stopping], now)

    assert shown(nobody) in shown(OPERATING)
    assert "stopping, saving its Runs since" in saving
    assert "stopping, saving its Runs since" in shown(OPERATING)
    for line in ("Leases held: none", "Runs running: none", "Passed over in the last day: none"):
        assert line in shown(OPERATING)


def session(number: int, kind: str) -> SessionRecord:
    return SessionRecord(
        id=number, run_id=3, kind=kind, harness="claude", model=None, harness_session_id=None,
        resumed_from_id=None, log_path="x.jsonl", state="ended", prompt="", final_message=None,
        killed_work=None, error=None, started_at=datetime.now(UTC), ended_at=None, usage=Usage(),
    )  # fmt: skip


def test_the_lines_logs_prints_for_a_missing_session_are_on_the_operating_page() -> None:
    """`logs --session` naming a Session the Run does not have says so as documented."""
    run = Run(
        id=3, repository=Repository(1, "acme", "widgets"), issue_number=7, kind=RunKind.DELIVERY,
        state=RunState.FAILED, base_branch="main", issue_branch="issue-7", head_sha=None,
        pull_request_number=None, harness="claude", model=None, cause=None, killed_work=None,
        last_session_log=None, started_at=datetime.now(UTC), ended_at=None,
    )  # fmt: skip
    sessions = [session(1, "implement"), session(2, "implement-resume")]

    for given in (sessions, []):
        with pytest.raises(NotRecorded) as missing:
            pick_session(run, given, "repair-1")
        assert shown(str(missing.value)) in shown(OPERATING)


REFERENCE = command_reference(main)
ENTRIES = list(command_entries(main))


@pytest.mark.parametrize("entry", ENTRIES, ids=[" ".join(e.words) or "thirdshift" for e in ENTRIES])
def test_the_command_reference_names_each_command_its_arguments_options_and_help(
    entry: CommandEntry,
) -> None:
    """Every command and group of the click tree has a section in the generated reference with
    each argument, each option spelling and its help text."""
    words, command = entry.words, entry.command
    title = " ".join(("thirdshift", *words))
    found = re.findall(rf"^## `{re.escape(title)}`\n.*?(?=^## |\Z)", REFERENCE, re.M | re.S)
    assert len(found) == 1, f"the command reference has {len(found)} sections for {title}"
    [section] = found
    missing = [o for o in option_names(command) if not re.search(rf"`[^`]*{o}\b", section)]
    assert missing == [], f"{title}: the command reference lacks {missing}"
    for argument in (p for p in command.params if isinstance(p, click.Argument)):
        assert f"`{argument.make_metavar(entry.context)}`" in section
    if command.help:
        assert shown(command.help.split("\n\n")[0]) in shown(section.replace("&lt;", "<"))


def test_the_command_reference_walk_reaches_groups_and_their_commands() -> None:
    """The reference is not vacuous: the root, a group and a nested command are in it."""
    names = {" ".join(entry.words) for entry in ENTRIES}
    assert {"", "sandbox", "sandbox model", "actions init", "run"} <= names
    assert "`--request-log FILE`" in REFERENCE
    assert REFERENCE.count("`-h, --help`") == len(ENTRIES), "each command takes -h as the root"


SETTINGS = settings_reference()


@pytest.mark.parametrize("name", list(Settings.model_fields))
def test_the_settings_reference_lists_each_field_with_its_variable_and_description(
    name: str,
) -> None:
    """Every field of ``Settings`` has a section naming its environment variable(s), its type,
    its default and a description."""
    field = Settings.model_fields[name]
    found = re.findall(rf"^## `{name}`\n.*?(?=^## |\Z)", SETTINGS, re.M | re.S)
    assert len(found) == 1, f"the settings reference has {len(found)} sections for {name}"
    [section] = found
    assert field.description, f"Settings.{name} has no description for the settings reference"
    assert shown(field.description) in shown(section.replace("&lt;", "<").replace("&gt;", ">"))
    for variable in setting_variables(name, field):
        assert f"`{variable}`" in section
    assert "- type: `" in section
    assert "- default: " in section


def test_the_settings_reference_names_the_github_token_s_two_variables() -> None:
    """An aliased field lists the variables that set it, not a name no one reads."""
    assert setting_variables("github_token", Settings.model_fields["github_token"]) == [
        "THIRDSHIFT_GITHUB_TOKEN",
        "GITHUB_TOKEN",
    ]
    assert "- default: `5`" in SETTINGS.split("## `max_repairs`", 1)[1].split("\n## ", 1)[0]


def test_the_site_build_is_strict_about_links_anchors_and_the_nav() -> None:
    """mkdocs.yml keeps the checks that make `mkdocs build --strict` fail on a broken link or
    anchor or a page left out of the navigation."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    for check in ("omitted_files", "not_found", "unrecognized_links", "anchors"):
        assert config["validation"][check] == "warn", check


def test_every_page_in_docs_is_in_the_navigation() -> None:
    """Each hand-written page is listed in mkdocs.yml's nav (the strict build also says so)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def listed(nav: object) -> Iterator[str]:
        if isinstance(nav, str):
            yield nav
        elif isinstance(nav, list):
            for item in nav:
                yield from listed(item)
        elif isinstance(nav, dict):
            for value in nav.values():
                yield from listed(value)

    assert set(PAGES) - set(listed(config["nav"])) == set()


def test_the_settings_reference_lists_the_fields_of_a_table_setting() -> None:
    """A setting whose values are tables (``model_prices``) shows each key a table takes."""
    section = SETTINGS.split("## `model_prices`", 1)[1].split("\n## ", 1)[0]
    for key in ModelPrice.model_fields:
        assert f"- `{key}` (`" in section, key


def _texts_thirdshift_shows() -> list[tuple[str, str]]:
    """Every string literal of the package that is not a docstring: the messages, checks and
    files thirdshift prints or writes, each with the module it is in."""
    found = []
    for path in sorted((ROOT / "thirdshift").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        found += [
            (str(path.relative_to(ROOT)), node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ]
    return found


SHOWN = _texts_thirdshift_shows()


def test_no_message_or_written_file_sends_a_reader_to_a_readme_section() -> None:
    """The README is one screen now: a message, a doctor's fix or a file thirdshift writes
    that points a reader on names a docs page, never a README section that moved."""
    pointers = [(where, text) for where, text in SHOWN if re.search(r"\bREADME\b(?!\.md)", text)]
    assert pointers == []


def test_each_docs_page_a_message_or_written_file_names_exists() -> None:
    """``docs/<page>.md`` in what thirdshift prints or writes is a page of docs/."""
    cited = {
        (where, page) for where, text in SHOWN for page in re.findall(r"docs/([\w-]+\.md)", text)
    }
    assert {page for _, page in cited} >= {"configuration.md", "github-actions.md"}
    missing = [(where, page) for where, page in cited if page not in PAGES]
    assert missing == []


# Pages the site build generates (docs/hooks.py): a link to them resolves on the site only.
GENERATED = {"reference/commands.md", "reference/settings.md"}


def test_each_link_of_a_docs_page_resolves_in_the_repository_too() -> None:
    """The pages are read on GitHub as well as on the site: a relative link names a file of the
    repository from the page's own folder (``../adr/...``), not only where the site puts it."""
    links = [
        (name, link)
        for name, text in PAGES.items()
        for link in re.findall(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)", text)
        if "://" not in link and not link.startswith("mailto:")
    ]
    assert any(link.startswith("../adr/") for _, link in links), "no page links an ADR"
    broken = [
        (name, link)
        for name, link in links
        if link not in GENERATED and not (DOCS / link).resolve().exists()
    ]
    assert broken == []
