"""MkDocs hooks (mkdocs.yml ``hooks:``): the pages the site builds from elsewhere.

The home page is README.md, the glossary CONTEXT.md, the changelog CHANGELOG.md and the
decisions adr/*.md, each read from the repository at build time, never copied by hand; the
command and settings references are generated from the code (thirdshift.cli.reference). Links
are written in the repository for GitHub (``docs/daemon.md``, ``../adr/0005-...md``) and
rewritten here to where the same file lands on the site (adr/0035).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from thirdshift.cli import main
from thirdshift.cli.reference import command_reference, settings_reference

ROOT = Path(__file__).resolve().parents[1]

# Repository files that become site pages, by their path on the site.
COPIED = {"index.md": "README.md", "glossary.md": "CONTEXT.md", "changelog.md": "CHANGELOG.md"}
ADR_NAV_TITLE = "Decisions (ADRs)"

_LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]*)?\)")


def adr_files() -> list[Path]:
    return sorted((ROOT / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"))


def _title(path: Path) -> str:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return first.removeprefix("# ").strip()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Lists every ADR under its nav entry, so a new ADR needs no edit of mkdocs.yml."""
    entries: list[dict[str, str]] = [{"All decisions": "adr/index.md"}]
    entries += [{_title(path): f"adr/{path.name}"} for path in adr_files()]
    nav = config.nav or []
    for index, item in enumerate(nav):
        if isinstance(item, dict) and ADR_NAV_TITLE in item:
            nav[index] = {ADR_NAV_TITLE: entries}
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for site_path, repository_path in COPIED.items():
        text = (ROOT / repository_path).read_text(encoding="utf-8")
        files.append(File.generated(config, site_path, content=text))
    for path in adr_files():
        text = path.read_text(encoding="utf-8")
        files.append(File.generated(config, f"adr/{path.name}", content=text))
    files.append(File.generated(config, "adr/index.md", content=adr_index()))
    files.append(File.generated(config, "reference/commands.md", content=command_reference(main)))
    files.append(File.generated(config, "reference/settings.md", content=settings_reference()))
    return files


def adr_index() -> str:
    lines = [
        "# Decisions (ADRs)\n",
        "Each decision someone would otherwise re-litigate, with the options weighed.\n",
    ]
    lines += [f"- [{_title(path)}]({path.name})" for path in adr_files()]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Rewrites the page's repository links to the site's paths."""
    site_path = page.file.src_uri
    source = COPIED.get(site_path)
    if source is None:
        generated = site_path.startswith(("adr/", "reference/"))
        source = site_path if generated else f"docs/{site_path}"
    return _LINK.sub(lambda match: _relinked(match, source, site_path), markdown)


def _relinked(match: re.Match[str], source: str, site_path: str) -> str:
    target, anchor = match.group(1), match.group(2) or ""
    if not target or "://" in target or target.startswith(("mailto:", "/")):
        return match.group(0)
    in_repository = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    on_site = site_page(in_repository)
    if on_site is None:
        return match.group(0)  # left as written: the strict build reports it if it is broken
    relative = posixpath.relpath(on_site, posixpath.dirname(site_path) or ".")
    return f"]({relative}{anchor})"


def site_page(repository_path: str) -> str | None:
    """Where a repository file is on the site, or None when it is not a page of it."""
    for site_path, copied in COPIED.items():
        if repository_path == copied:
            return site_path
    if repository_path == "adr":
        return "adr/index.md"
    if repository_path.startswith("adr/"):
        return repository_path
    if repository_path.startswith("docs/"):
        return repository_path.removeprefix("docs/")
    return None
