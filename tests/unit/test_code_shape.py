"""The shape issue 22 set for the code, checked on every run so it does not grow back: small
functions and signatures in ``runs``, short Run kinds, a composition root of small modules, and
a reason in the docstring of any module that stays long (adr/0008, adr/0031)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "thirdshift"


@dataclass(frozen=True)
class Function:
    where: str
    lines: int
    parameters: int


def _functions(path: Path) -> Iterator[Function]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
            count = len(names) + len(arguments.kwonlyargs)
            count += (arguments.vararg is not None) + (arguments.kwarg is not None)
            if names and names[0] in ("self", "cls"):
                count -= 1
            assert node.end_lineno is not None
            yield Function(
                f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}",
                node.end_lineno - node.lineno + 1,
                count,
            )


def _modules(under: Path) -> list[Path]:
    return sorted(under.rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_function_in_runs_is_over_60_lines_or_takes_more_than_8_parameters() -> None:
    functions = [f for p in _modules(PACKAGE / "runs") for f in _functions(p)]
    assert [f.where for f in functions if f.lines > 60] == []
    assert [f.where for f in functions if f.parameters > 8] == []


def test_no_function_of_the_product_is_over_100_lines() -> None:
    """The sandbox (the stand-ins, which are not the product) aside."""
    product = [p for p in _modules(PACKAGE) if "sandbox" not in p.relative_to(PACKAGE).parts]
    assert [f.where for p in product for f in _functions(p) if f.lines > 100] == []


@pytest.mark.parametrize(
    ("module", "most"), [("runs/delivery.py", 250), ("runs/architect/run.py", 300)]
)
def test_the_run_kinds_stay_short(module: str, most: int) -> None:
    assert _lines(PACKAGE / module) < most


def test_no_other_runs_module_and_no_composition_root_module_is_over_400_lines() -> None:
    kinds = {PACKAGE / "runs/delivery.py", PACKAGE / "runs/architect/run.py"}
    runs = [p for p in _modules(PACKAGE / "runs") if p not in kinds]
    root = _modules(PACKAGE / "bootstrap")
    assert root, "the composition root is the package thirdshift.bootstrap"
    assert [str(p) for p in [*runs, *root] if _lines(p) >= 400] == []


def test_a_module_over_500_lines_says_why_in_its_docstring() -> None:
    """Its docstring names its length ("About 700 lines: ...") and gives the reason beside it."""
    said = re.compile(r"\b\d[\d,]* lines\b")
    long = [p for p in _modules(PACKAGE) if _lines(p) > 500]
    unexplained = [
        str(p.relative_to(PACKAGE))
        for p in long
        if not said.search(ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "")
    ]
    assert unexplained == []


def test_runs_shows_its_wings_a_small_kit_at_the_top_and_no_namesakes() -> None:
    """``runs/`` keeps at most 12 modules at its top (the shared kit); the Spec run, the
    Architect run and the pure rules are packages of their own, so no module under ``runs/`` is
    told apart by a ``spec_``, ``architect_`` or ``plan_`` prefix, and no step shares a stem with
    a module of the kit."""
    runs = PACKAGE / "runs"
    top = sorted(path.name for path in runs.glob("*.py"))
    assert len(top) <= 12, top
    for wing in ("rules", "spec", "architect", "steps"):
        assert (runs / wing / "__init__.py").is_file(), wing
    prefixed = [
        str(path.relative_to(runs))
        for path in runs.rglob("*.py")
        if path.stem.startswith(("spec_", "architect_", "plan_"))
    ]
    assert prefixed == []
    steps = {path.stem for path in (runs / "steps").glob("*.py")} - {"__init__"}
    assert sorted(steps & {path.stem for path in runs.glob("*.py")}) == []


def _dataclass_fields(path: Path) -> Iterator[Function]:
    """Each dataclass of ``path`` as a constructor: its fields are its parameters."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and any(
            "dataclass" in ast.unparse(decorator) for decorator in node.decorator_list
        ):
            fields = [
                item
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and "ClassVar" not in ast.unparse(item.annotation)
            ]
            assert node.end_lineno is not None
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"
            yield Function(where, node.end_lineno - node.lineno + 1, len(fields))


def test_no_constructor_in_sessions_takes_more_than_8_parameters() -> None:
    """An ``__init__`` (``self`` aside) or a dataclass's fields: past 8, the collaborators
    belong in frozen parameter objects, as a Run's do (issue 31)."""
    modules = _modules(PACKAGE / "sessions")
    inits = [f for p in modules for f in _functions(p) if f.where.endswith(" __init__")]
    fields = [f for p in modules for f in _dataclass_fields(p)]
    assert [f.where for f in [*inits, *fields] if f.parameters > 8] == []


def test_no_function_in_daemon_is_over_60_lines_and_no_constructor_takes_more_than_8() -> None:
    """The daemon built like a Run (issue 31): small named steps, and its collaborators in
    frozen parameter objects past 8 (an ``__init__``'s parameters, ``self`` aside, or a
    dataclass's fields)."""
    modules = _modules(PACKAGE / "daemon")
    functions = [f for p in modules for f in _functions(p)]
    inits = [f for f in functions if f.where.endswith(" __init__")]
    fields = [f for p in modules for f in _dataclass_fields(p)]
    assert [f.where for f in functions if f.lines > 60] == []
    assert [f.where for f in [*inits, *fields] if f.parameters > 8] == []


def test_no_two_public_classes_of_the_product_share_a_name() -> None:
    """A name says one thing wherever it is read (the sandbox included): a top-level class not
    ``_``-prefixed is defined once in ``thirdshift/``."""
    where: dict[str, list[str]] = {}
    for path in _modules(PACKAGE):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
