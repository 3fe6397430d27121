"""The documentation site's strict build, run for real on a copy of the repository's docs: it
passes as the repository is, and fails on a page left out of the nav or a broken anchor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# What the site is built from: mkdocs.yml, docs/ (with the hook) and the files the hook reads.
SOURCES = ("mkdocs.yml", "docs", "adr", "README.md", "CONTEXT.md", "CHANGELOG.md")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what the site is built from, to break without touching the repository."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tmp_path / name)
    return tmp_path


def build(checkout: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", "site"]
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        command, cwd=checkout, env=environment, capture_output=True, text=True, timeout=120
    )


def test_the_site_builds_strictly_with_the_generated_pages(checkout: Path) -> None:
    """The strict build passes and makes the home page, glossary, ADRs and both references."""
    result = build(checkout)

    assert result.returncode == 0, result.stderr
    site = checkout / "site"
    for page in ("index.html", "glossary", "changelog", "reference/commands", "reference/settings"):
        assert (site / page).exists(), page
    adrs = sorted(path.stem for path in (ROOT / "adr").glob("[0-9]*.md"))
    assert adrs
    assert all((site / "adr" / name / "index.html").exists() for name in adrs)
    assert "max_repairs" in (site / "reference/settings/index.html").read_text(encoding="utf-8")


def test_a_page_left_out_of_the_nav_fails_the_build(checkout: Path) -> None:
    """A page in docs/ that the nav does not list is an error, not a page nobody can find."""
    (checkout / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")

    result = build(checkout)

    assert result.returncode != 0
    assert "orphan.md" in result.stderr


def test_a_link_to_a_missing_heading_fails_the_build(checkout: Path) -> None:
    """A link whose #anchor names no heading of its page is an error."""
    page = checkout / "docs" / "security.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](json.md#no-such-shape)\n")

    result = build(checkout)

    assert result.returncode != 0
    assert "no-such-shape" in result.stderr


def test_a_readme_link_to_a_missing_page_fails_the_build(checkout: Path) -> None:
    """The home page is the README: its links are checked like any page's."""
    readme = checkout / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\n[gone](docs/no-such-page.md)\n")

    result = build(checkout)

    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr
