"""The Harness registry: the facts of each Harness that code outside its adapter needs, as
plain data, one entry per Harness.

It lives below ``settings`` (which checks the harness settings against it), the doctor's and
the workflow's rules (which name the npm package, the pinned version and the provider's key)
and the CLI, none of which may import the adapters in ``thirdshift.harnesses``; that package
builds an entry's adapter (``thirdshift.harnesses.registry``), and each adapter takes its name
and executable from its entry. What an adapter's behaviour decides (its argv, its stream, its
stop signals, whether its CLI reports a cost) stays in the adapter, read through ``Harness``.

A Harness is added with an adapter module, one entry here and its adapter's line in
``thirdshift.harnesses.registry``. The pinned versions are the ones ``package.json`` installs
for the tests and the demo; a unit test keeps the two, and the workflow, equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.errors import UsageError


@dataclass(frozen=True)
class HarnessEntry:
    """One Harness: its ``name`` (in settings, on the command line, on each Session's row),
    the npm package its CLI ships in and the ``version`` of it thirdshift is tested with (the
    workflow installs that one), the program a Session starts, and the variable holding its
    model provider's API key that the workflow passes from the repository's secrets."""

    name: str
    npm_package: str
    version: str
    executable: str
    api_key_variable: str

    @property
    def pinned_package(self) -> str:
        """``<package>@<version>``, as ``npm install`` takes it."""
        return f"{self.npm_package}@{self.version}"


CLAUDE = HarnessEntry(
    name="claude",
    npm_package="@anthropic-ai/claude-code",
    version="2.1.328",
    executable="claude",
    api_key_variable="ANTHROPIC_API_KEY",
)
CODEX = HarnessEntry(
    name="codex",
    npm_package="@openai/codex",
    version="0.169.0",
    executable="codex",
    api_key_variable="OPENAI_API_KEY",
)

OPENCODE = HarnessEntry(
    name="opencode",
    npm_package="opencode-ai",
    version="1.18.33",
    executable="opencode",
    api_key_variable="ANTHROPIC_API_KEY",
)

QWEN = HarnessEntry(
    name="qwen",
    npm_package="@qwen-code/qwen-code",
    version="0.24.4",
    executable="qwen",
    api_key_variable="ANTHROPIC_API_KEY",
)

HARNESSES = (CLAUDE, CODEX, OPENCODE, QWEN)
"""Every Harness, the default first."""

HARNESS_NAMES = tuple(entry.name for entry in HARNESSES)
DEFAULT_HARNESS = HARNESSES[0].name


def find_harness(name: str) -> HarnessEntry | None:
    """The entry of the Harness ``name``, or None when no Harness is called that."""
    return next((entry for entry in HARNESSES if entry.name == name), None)


def harness_entry(name: str) -> HarnessEntry:
    """The entry of the Harness ``name``; an unknown name is a usage error listing the known
    ones."""
    entry = find_harness(name)
    if entry is None:
        raise UsageError(f"unknown harness '{name}'; choose one of {', '.join(HARNESS_NAMES)}")
    return entry


def harness_names_listed() -> str:
    """The names for a sentence: ``claude or codex``."""
    *rest, last = HARNESS_NAMES
    return f"{', '.join(rest)} or {last}" if rest else last


def harness_not_found(entry: HarnessEntry, role: str, other: str, *, settable: bool = True) -> str:
    """Why ``entry``'s CLI cannot be run and the fix, for every place that looks for it
    (``role``: what makes this Harness one to run; ``other``: the way to choose another;
    ``settable``: whether the ``harness_paths`` setting is read there; the demo reads none)."""
    where = "in no directory of harness_paths, not" if settable else "not"
    own_directory = "set harness_paths to the directory holding it, or " if settable else ""
    return (
        f"{entry.executable} (the {entry.name} Harness, {role}) is not installed: it is {where} "
        "in the node_modules/.bin beside thirdshift's virtual environment and not on PATH; run "
        f"scripts/install in thirdshift's checkout, or npm install -g {entry.pinned_package}, "
        f"or {own_directory}{other}"
    )
