"""The Harness registry is the one list of Harnesses: the npm pins the tests install, the
workflow `actions init` writes, the settings and the adapters all agree with it."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from thirdshift.actions.pins import harness_manifest
from thirdshift.actions.workflow import WorkflowChoices, workflow_text
from thirdshift.errors import UsageError
from thirdshift.harness_registry import (
    DEFAULT_HARNESS,
    HARNESS_NAMES,
    HARNESSES,
    HarnessEntry,
    find_harness,
    harness_entry,
)
from thirdshift.harnesses import claude, codex, harness_named, qwen
from thirdshift.harnesses.registry import ADAPTERS
from thirdshift.settings import Settings

ROOT = Path(__file__).parents[2]


def manifest(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / name).read_text(encoding="utf-8"))
    return loaded


def workflow_steps(harness: str) -> list[dict[str, Any]]:
    text = workflow_text(WorkflowChoices(install="thirdshift==0.1.0", harness=harness))
    steps: list[dict[str, Any]] = yaml.safe_load(text)["jobs"]["run"]["steps"]
    return steps


@pytest.mark.parametrize("entry", HARNESSES, ids=HARNESS_NAMES)
def test_package_json_pins_each_harness_cli_at_the_registry_s_version(entry: HarnessEntry) -> None:
    """The CLIs the tests and the demo install are the versions thirdshift says it is tested
    with: package.json and its lock file name the registry's package at the registry's
    version."""
    pins = manifest("package.json")["devDependencies"]
    assert pins.get(entry.npm_package) == entry.version
    locked = manifest("package-lock.json")["packages"][f"node_modules/{entry.npm_package}"]
    assert locked["version"] == entry.version


@pytest.mark.parametrize("entry", HARNESSES, ids=HARNESS_NAMES)
def test_the_workflow_installs_the_cli_package_json_pins_and_passes_its_provider_s_key(
    entry: HarnessEntry,
) -> None:
    """`actions init` installs on the runner the very CLI the tests ran (package.json's pin),
    and hands the Run its provider's key from the repository's secrets."""
    steps = workflow_steps(entry.name)
    [install] = [step for step in steps if "npm ci" in step.get("run", "")]
    assert "npm ci --prefix .github/thirdshift" in install["run"]
    pinned = manifest("package.json")["devDependencies"][entry.npm_package]
    assert json.loads(harness_manifest(entry))["dependencies"] == {entry.npm_package: pinned}
    [run] = [step for step in steps if step.get("id") == "thirdshift"]
    key = entry.api_key_variable
    assert run["env"][key] == f"${{{{ secrets.{key} }}}}"
    assert run["env"]["THIRDSHIFT_HARNESS"] == entry.name


def test_every_entry_has_its_adapter_and_every_adapter_an_entry() -> None:
    """Adding a Harness is an adapter module, its registry entry and its line in ADAPTERS:
    the three agree on its name, and the adapter starts the entry's executable."""
    assert tuple(ADAPTERS) == HARNESS_NAMES
    for entry in HARNESSES:
        harness = harness_named(entry.name)
        assert (harness.name, harness.executable) == (entry.name, entry.executable)


@pytest.mark.parametrize(
    ("module", "entry"), [(claude, "claude"), (codex, "codex"), (qwen, "qwen")]
)
def test_an_adapter_names_the_version_its_facts_were_checked_on(
    module: ModuleType, entry: str
) -> None:
    """A new pin means checking again the CLI facts the adapter's docstring lists: the
    docstring names the pinned version, so bumping only the registry fails here."""
    pinned = harness_entry(entry)
    assert f"{pinned.version}, the pinned version" in (module.__doc__ or "")


def test_an_unknown_harness_is_a_usage_error_listing_the_known_ones() -> None:
    """No entry, no adapter: the name is refused with the names that would do."""
    assert find_harness("gemini") is None
    with pytest.raises(UsageError, match="unknown harness 'gemini'; choose one of claude, codex"):
        harness_named("gemini")
    with pytest.raises(UsageError, match="unknown harness 'gemini'"):
        workflow_text(WorkflowChoices(install="thirdshift", harness="gemini"))


def test_the_settings_take_exactly_the_registry_s_names() -> None:
    """The harness settings' JSON schema lists the registry's names, and the default Harness
    is the registry's default."""
    schema = Settings.model_json_schema()["properties"]
    assert schema["harness"]["enum"] == list(HARNESS_NAMES)
    assert schema["harness"]["default"] == DEFAULT_HARNESS
    assert schema["harness_fallbacks"]["items"]["enum"] == list(HARNESS_NAMES)
    for field in ("harness_models", "harness_options"):
        assert schema[field]["propertyNames"]["enum"] == list(HARNESS_NAMES)
