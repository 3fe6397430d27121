"""The npm locks ``thirdshift actions init`` writes beside the workflow, cut out of this
repository's own ``package-lock.json``: each Harness CLI with exactly the packages (and
integrity hashes) the tests and the demo install.

``python -m tests.support.npm_locks`` rewrites ``thirdshift/actions/harness_locks/`` after
``package.json`` moves a Harness CLI to another version; a unit test says when to.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from thirdshift.actions.pins import lock_name
from thirdshift.harness_registry import HARNESSES, HarnessEntry

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "thirdshift" / "actions" / "harness_locks"


def _resolve(packages: dict[str, Any], parent: str, name: str) -> str | None:
    """Where npm puts ``name`` required by the package at ``parent``: the nearest
    ``node_modules`` up from it that holds it (none: an optional package for another
    platform, which the lock does not list)."""
    at = parent
    while True:
        candidate = f"{at}/node_modules/{name}" if at else f"node_modules/{name}"
        if candidate in packages:
            return candidate
        if not at:
            return None
        at = at.rsplit("/node_modules/", 1)[0] if "/node_modules/" in at else ""


def harness_lock(entry: HarnessEntry, root_lock: dict[str, Any]) -> dict[str, Any]:
    """The package-lock.json of a project whose one dependency is ``entry``'s CLI."""
    packages: dict[str, Any] = root_lock["packages"]
    wanted = [f"node_modules/{entry.npm_package}"]
    kept: dict[str, Any] = {}
    while wanted:
        path = wanted.pop()
        if path in kept:
            continue
        found = {key: value for key, value in packages[path].items() if key != "dev"}
        kept[path] = found
        for field in ("dependencies", "optionalDependencies"):
            for name in found.get(field, {}):
                resolved = _resolve(packages, path, name)
                if resolved is not None:
                    wanted.append(resolved)
    if kept[f"node_modules/{entry.npm_package}"]["version"] != entry.version:
        raise SystemExit(
            f"package-lock.json has {entry.npm_package} "
            f"{kept[f'node_modules/{entry.npm_package}']['version']}, the Harness registry "
            f"{entry.version}: make them agree first"
        )
    name = lock_name(entry)
    return {
        "name": name,
        "lockfileVersion": root_lock["lockfileVersion"],
        "requires": True,
        "packages": {
            "": {"name": name, "dependencies": {entry.npm_package: entry.version}},
            **dict(sorted(kept.items())),
        },
    }


def expected_locks() -> dict[str, str]:
    """Each Harness's lock file name and text, from this repository's package-lock.json."""
    root_lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    return {
        f"{entry.name}.json": json.dumps(harness_lock(entry, root_lock), indent=2) + "\n"
        for entry in HARNESSES
    }


def main() -> None:
    for stale in LOCKS.glob("*.json"):
        stale.unlink()
    for file_name, text in expected_locks().items():
        (LOCKS / file_name).write_text(text, encoding="utf-8")
        print(LOCKS / file_name, file=sys.stderr)


if __name__ == "__main__":
    main()
