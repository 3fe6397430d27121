"""What the workflow ``thirdshift actions init`` writes runs, pinned (adr/0036): each action at
a full commit SHA with its release in a comment, and the Harness CLI from an npm lock written
beside the workflow, so what runs with the repository's secrets is exactly what a reviewer
signed off and a moved tag changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import HarnessEntry


@dataclass(frozen=True)
class ActionPin:
    """An action at the commit its release tag named when it was pinned."""

    repository: str
    sha: str
    version: str

    @property
    def uses(self) -> str:
        """The ``uses:`` value with its release as a comment, as Dependabot keeps them."""
        return f"{self.repository}@{self.sha} # {self.version}"


# Read from each action's repository: the commit its release tag points at.
CHECKOUT = ActionPin("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1")
SETUP_PYTHON = ActionPin(
    "actions/setup-python", "5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"
)
SETUP_NODE = ActionPin("actions/setup-node", "820762786026740c76f36085b0efc47a31fe5020", "v7.0.0")
UPLOAD_ARTIFACT = ActionPin(
    "actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"
)

LOCK_DIRECTORY = ".github/thirdshift"
"""Where the Harness CLI's ``package.json`` and ``package-lock.json`` go, in the repository."""


def lock_name(entry: HarnessEntry) -> str:
    """The npm project name of the lock installing ``entry``'s CLI."""
    return f"thirdshift-harness-{entry.name}"


def harness_manifest(entry: HarnessEntry) -> str:
    """The ``package.json`` whose one dependency is ``entry``'s CLI at its pinned version."""
    manifest = {
        "name": lock_name(entry),
        "private": True,
        "description": f"The {entry.name} Harness CLI the thirdshift workflow installs (npm ci).",
        "dependencies": {entry.npm_package: entry.version},
    }
    return json.dumps(manifest, indent=2) + "\n"


def harness_lock(entry: HarnessEntry) -> str:
    """The ``package-lock.json`` of ``harness_manifest``: every package with its integrity
    hash, shipped with thirdshift (the versions its tests and demo run)."""
    source = resources.files("thirdshift.actions").joinpath("harness_locks", f"{entry.name}.json")
    try:
        return source.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ThirdshiftError(
            f"this thirdshift ships no npm lock for the {entry.name} Harness; reinstall "
            "thirdshift, or choose another --harness"
        ) from error
