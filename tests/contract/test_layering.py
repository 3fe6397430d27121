"""The import contracts of adr/0008 hold, and they do catch a forbidden import: the check runs
on a copy of the package with one bad import planted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The package and its contracts, copied where a test may break them."""
    shutil.copytree(
        ROOT / "thirdshift", tmp_path / "thirdshift", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_every_import_contract(tree: Path) -> None:
    """lint-imports passes on the package as it is."""
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("store/repository.py", "import thirdshift.runs", "Layers: the CLI on top"),
        ("newcomer.py", "import thirdshift.errors", "Layers: the CLI on top"),
        ("__init__.py", "import thirdshift.sandbox", "The package root"),
        ("runs/rules/branches.py", "import thirdshift.store", "Rules never import adapters"),
        ("runs/delivery.py", "import thirdshift.github", "A Run reaches GitHub and the Harness"),
        ("daemon/poll.py", "import thirdshift.github", "The daemon reaches GitHub, git"),
        ("daemon/ready.py", "import thirdshift.store", "Rules never import adapters"),
        ("daemon/daemon.py", "import thirdshift.bootstrap", "Layers: the CLI on top"),
        (
            "harnesses/stream.py",
            "import thirdshift.store",
            "Harness adapters never import the store",
        ),
        (
            "runs/claims.py",
            "import thirdshift.sandbox.client",
            "The product never imports the sandbox",
        ),
        ("sessions/rules.py", "import github", "Only thirdshift.github imports PyGithub"),
        ("store/tables.py", "import git", "Only thirdshift.git imports GitPython"),
        ("git/runner.py", "import sqlalchemy", "Only thirdshift.store imports SQLAlchemy"),
        ("store/rows.py", "import apprise", "Only thirdshift.notify imports Apprise"),
        ("runs/rules/post_mortem.py", "import thirdshift.store", "Rules never import adapters"),
        ("runs/delivery.py", "import thirdshift.notify", "A Run reaches GitHub and the Harness"),
        ("harnesses/base.py", "import thirdshift.harnesses.claude", "No import cycle"),
        # Settings and the rules read the Harness registry: it may not reach the adapters.
        ("harness_registry.py", "import thirdshift.harnesses", "Layers: the CLI on top"),
        # A step takes what another made from the Run's scope, never from the other step.
        ("runs/steps/brief.py", "import thirdshift.runs.steps.session", "The steps of a Run"),
        # The composition root builds Run kinds; it never needs a step.
        ("bootstrap/runs.py", "import thirdshift.runs.steps.finish", "Only the Run kinds"),
        ("runs/failed_run.py", "import thirdshift.runs.steps.worktree", "Only the Run kinds"),
        ("daemon/poll.py", "import thirdshift.runs.claims", "Other packages use the public faces"),
        ("cli/running.py", "import thirdshift.runs.rules.plans", "public faces of runs"),
        # setup and the daemon's rules read the rules through their own light face.
        ("setup/labels.py", "import thirdshift.runs.rules.plans", "public faces of runs"),
        ("daemon/poll.py", "import thirdshift.runs.spec.claim", "public faces of runs"),
        ("web/page.py", "import thirdshift.runs.architect.run", "public faces of runs"),
        ("runs/rules/ticket_rescue.py", "import thirdshift.git", "Rules never import adapters"),
        ("runs/rules/gates.py", "import thirdshift.sessions.cli_outside", "Rules never import"),
        ("sandbox/demo.py", "import thirdshift.cli.common", "Layers: the CLI on top"),
        (
            "cli/status.py",
            "import thirdshift.sandbox.client",
            "The product never imports the sandbox",
        ),
        ("cli/common.py", "import thirdshift.cli.running", "No import cycle"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tree: Path, module: str, planted: str, contract: str
) -> None:
    """Planting one forbidden import (or a module no layer holds) makes lint-imports fail,
    naming the contract."""
    path = tree / "thirdshift" / module
    text = path.read_text() if path.exists() else '"""A module no layer names yet."""\n'
    path.write_text(f"{text}\n{planted}  # noqa: E402, F401\n")
    done = _lint(tree)
    assert done.returncode != 0
    broken = done.stdout[done.stdout.index("Broken contracts") :]
    assert contract in broken


def test_every_module_of_the_product_is_kept_from_the_sandbox() -> None:
    """The no-sandbox contract names the CLI's modules one by one (its sandbox and demo
    commands may import the sandbox): a new module, of the CLI or of the package, is in it."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    no_sandbox = next(c for c in contracts["contracts"] if c["id"] == "no-sandbox")
    sources = set(no_sandbox["source_modules"])
    allowed = {"thirdshift.cli", "thirdshift.cli.__main__", "thirdshift.cli.sandbox"}
    cli = {
        f"thirdshift.cli.{path.stem}" if path.stem != "__init__" else "thirdshift.cli"
        for path in (ROOT / "thirdshift" / "cli").glob("*.py")
    }
    assert sorted(cli - allowed - sources) == []
    packages = {
        f"thirdshift.{path.stem if path.suffix else path.name}"
        for path in (ROOT / "thirdshift").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert sorted(packages - {"thirdshift.cli", "thirdshift.sandbox"} - sources) == []


def test_every_private_module_of_runs_is_kept_from_other_packages() -> None:
    """The public-face contract names the modules and wings of runs one by one (the rules' own
    face stays importable): a new one is in the list, or this fails."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    face = next(c for c in contracts["contracts"] if c["id"] == "runs-public-face")
    runs = ROOT / "thirdshift" / "runs"
    children = {
        f"thirdshift.runs.{path.stem if path.suffix else path.name}"
        for path in runs.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    expected = (children - {"thirdshift.runs.rules"}) | {"thirdshift.runs.rules.*"}
    assert sorted(face["forbidden_modules"]) == sorted(expected)
    assert "ignore_imports" not in face
