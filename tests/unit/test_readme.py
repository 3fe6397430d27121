"""The README is one screen that links onwards: short, its links resolve to pages and headings
that exist, and every command it shows is one the CLI has."""

from __future__ import annotations

import re
from pathlib import Path

import click
from markdown.extensions.toc import slugify

from thirdshift.cli import main

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINKS = re.findall(r"\]\(([^)\s]+)\)", README)


def anchors(page: Path) -> set[str]:
    """The anchors MkDocs gives the headings of ``page`` (code spans and emphasis unmarked)."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {slugify(re.sub(r"[`*]", "", heading), "-") for heading in headings}


def test_the_readme_fits_in_200_lines() -> None:
    """Everything past the first screen belongs in docs/; the README stays under 200 lines."""
    assert len(README.splitlines()) < 200


def test_the_readme_links_to_the_docs_pages() -> None:
    """The README's links lead on to the documentation (not a vacuous link check)."""
    linked = {link.split("#")[0] for link in LINKS}
    assert {"docs/getting-started.md", "docs/daemon.md", "docs/github-actions.md"} <= linked


def test_each_readme_link_resolves_to_an_existing_page_and_heading() -> None:
    """A relative link names a file of the repository, and its #anchor a heading of that page."""
    broken = []
    for link in LINKS:
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        if not target.exists() or (anchor and anchor not in anchors(target)):
            broken.append(link)
    assert broken == []


def test_each_command_the_readme_shows_is_a_command_of_the_cli() -> None:
    """`thirdshift <word>` in a code span or block of the README names a real command."""
    context = click.Context(main)
    blocks = "\n".join(re.findall(r"^ *```[a-z]*\n(.*?)^ *```", README, re.M | re.S))
    spans = "\n".join(
        re.findall(r"`([^`\n]+)`", re.sub(r"^ *```.*?^ *```", "", README, flags=re.M | re.S))
    )
    shown = set(re.findall(r"^\s*thirdshift ([a-z][a-z-]*)", f"{blocks}\n{spans}", re.M))
    assert shown, "the README shows no command"
    assert shown - set(main.list_commands(context)) == set()


def test_the_readme_shows_the_first_command_of_each_way_in() -> None:
    """A newcomer finds on the one screen how to prepare a repository (setup), check it
    (doctor), and the first command of each way to run thirdshift."""
    for command in (
        "thirdshift setup --repo",
        "thirdshift doctor",
        "thirdshift run https://",
        "thirdshift daemon",
        "thirdshift actions init",
    ):
        assert command in README, command
