"""What the daemon demo works on: its repository's files, its Ready issues, its Spec with two
Tickets, and the model script that answers each of them (as Claude Code's tools name things;
``sandbox.demo.model_script`` renames them for the other Harnesses)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thirdshift.sandbox.demo import CHECK_COMMAND

# main is green: the daemon's CI-fix Repair only answers a red check main does not share.
PROJECT_FILES = {
    "README.md": "# calculator\n\nA tiny library the thirdshift demo's daemon works on.\n",
    "calc.py": (
        '"""Arithmetic on two numbers."""\n\n\n'
        "def add(a: int, b: int) -> int:\n    return a - b\n\n\n"
        "def multiply(a: int, b: int) -> int:\n    return a * b\n"
    ),
    "test_calc.py": (
        "import unittest\n\nfrom calc import multiply\n\n\n"
        "class MultiplyTest(unittest.TestCase):\n"
        "    def test_multiplies(self) -> None:\n"
        "        self.assertEqual(multiply(2, 3), 6)\n"
    ),
    ".gitignore": "__pycache__/\n",
}


@dataclass(frozen=True)
class DemoIssue:
    """One Ready issue of the daemon demo and the session that answers it: the marker in its
    body finds its session in the model script."""

    title: str
    body: str
    marker: str
    turns: tuple[dict[str, Any], ...]


def _bash(command: str, description: str) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "Bash", "input": {"command": command, "description": description}}]
    }


def _write(path: str, text: str) -> str:
    return f"cat > {path} <<'DEMO_EOF'\n{text}DEMO_EOF\n"


TEST_ADD = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_adds(self) -> None:\n"
    "        self.assertEqual(add(2, 3), 5)\n"
)
STATS = '"""Statistics of a list of numbers."""\n\n\ndef mean(values: list[float]) -> float:\n'
TEST_MEAN = (
    "import unittest\n\nfrom stats import mean\n\n\n"
    "class MeanTest(unittest.TestCase):\n"
    "    def test_mean_of_two(self) -> None:\n"
    "        self.assertEqual(mean([1, 2]), 1.5)\n"
)

PLAIN_FIX = DemoIssue(
    title="add() subtracts instead of adding",
    body="`calc.add(2, 3)` returns -1; it should return 5. Add a test.\n\n<!-- DEMO-ADD -->\n",
    marker="DEMO-ADD",
    turns=(
        _bash(
            "sed -i 's/return a - b/return a + b/' calc.py && "
            + _write("test_add.py", TEST_ADD)
            + f"{CHECK_COMMAND} && git add calc.py test_add.py "
            "&& git commit -qm 'Make add() add, with its test'",
            "Fix add(), test it and commit",
        ),
        {"text": "add() adds now; its new test passes."},
    ),
)
# The first attempt divides with //: CI goes red, and the Repair's prompt starts so.
CI_FIX = DemoIssue(
    title="Add mean() to a stats module",
    body="We need `stats.mean(values)`, the arithmetic mean, with a test.\n\n<!-- DEMO-MEAN -->\n",
    marker="DEMO-MEAN",
    turns=(
        _bash(
            _write("stats.py", STATS + "    return sum(values) // len(values)\n")
            + _write("test_stats.py", TEST_MEAN)
            + "git add stats.py test_stats.py && git commit -qm 'Add mean()'",
            "Write mean() and its test",
        ),
        {"text": "mean() is in."},
    ),
)
REPAIR_MARKER = "CI is red on"
REPAIR_TURNS = (
    _bash(
        "sed -i 's|sum(values) // len|sum(values) / len|' stats.py && "
        f"{CHECK_COMMAND} && git commit -qam 'mean() divides exactly'",
        "Fix the division and run the tests",
    ),
    {"text": "mean() divides exactly now; the tests pass."},
)
DEMO_ISSUES = (PLAIN_FIX, CI_FIX)

UNITS = (
    '"""Units of length."""\n\n\ndef km_to_miles(km: float) -> float:\n    return km / 1.609344\n'
)
TEST_UNITS = (
    "import unittest\n\nfrom units import km_to_miles\n\n\n"
    "class KmTest(unittest.TestCase):\n"
    "    def test_a_marathon(self) -> None:\n"
    "        self.assertAlmostEqual(km_to_miles(42.195), 26.2188, places=3)\n"
)
MILES = "\n\n\ndef miles_to_km(miles: float) -> float:\n    return miles * 1.609344\n"
TEST_MILES = (
    "import unittest\n\nfrom units import km_to_miles, miles_to_km\n\n\n"
    "class MilesTest(unittest.TestCase):\n"
    "    def test_there_and_back(self) -> None:\n"
    "        self.assertAlmostEqual(km_to_miles(miles_to_km(3.0)), 3.0)\n"
)


@dataclass(frozen=True)
class DemoSpec:
    """The daemon demo's Spec: a Ready issue whose sub-issues are its Tickets (unlabelled; the
    second blocked by the first), run as one Spec run: each Ticket merged into the Spec branch,
    then the Spec review and one Spec PR. The Spec's marker finds the review's session; a
    Ticket's prompt quotes the Spec's brief too, but its own marker comes later in it."""

    title: str
    body: str
    marker: str
    tickets: tuple[DemoIssue, ...]
    review_turns: tuple[dict[str, Any], ...]


UNITS_SPEC = DemoSpec(
    title="Units of length",
    body="A `units` module converting kilometres and miles both ways, with tests; one Ticket "
    "per direction.\n\n<!-- DEMO-UNITS -->\n",
    marker="DEMO-UNITS",
    tickets=(
        DemoIssue(
            title="km_to_miles()",
            body="Add `units.km_to_miles(km)` with a test.\n\n<!-- DEMO-KM -->\n",
            marker="DEMO-KM",
            turns=(
                _bash(
                    _write("units.py", UNITS)
                    + _write("test_units.py", TEST_UNITS)
                    + f"{CHECK_COMMAND} && git add units.py test_units.py "
                    "&& git commit -qm 'Add km_to_miles()'",
                    "Write km_to_miles() and its test",
                ),
                {"text": "km_to_miles() is in, tested."},
            ),
        ),
        DemoIssue(
            title="miles_to_km()",
            body="Add `units.miles_to_km(miles)` beside `km_to_miles`, with a test of both "
            "ways.\n\n<!-- DEMO-MILES -->\n",
            marker="DEMO-MILES",
            turns=(
                _bash(
                    f"test -f units.py && cat >> units.py <<'DEMO_EOF'{MILES}DEMO_EOF\n"
                    + _write("test_miles.py", TEST_MILES)
                    + f"{CHECK_COMMAND} && git add units.py test_miles.py "
                    "&& git commit -qm 'Add miles_to_km()'",
                    "Write miles_to_km() and test both ways",
                ),
                {"text": "miles_to_km() is in; both ways are tested."},
            ),
        ),
    ),
    review_turns=(
        _bash(f"{CHECK_COMMAND}", "Run the tests of the whole Spec branch"),
        {"text": "Reviewed the Spec branch: both conversions agree and the tests pass."},
    ),
)
DEMO_SPECS = (UNITS_SPEC,)


TURN_DELAY_MS = 1500
"""Each scripted answer waits this long, as a model thinks: the Runs stay in flight long
enough for a person to watch them on the status page."""


def daemon_script(issues: Sequence[DemoIssue] = DEMO_ISSUES) -> dict[str, Any]:
    """The model script of the daemon demo, as Claude Code's tools name things."""
    named = [(f"issue-{i}", issue.marker, issue.turns) for i, issue in enumerate(issues, 1)]
    for spec in DEMO_SPECS:
        named.extend((f"ticket-{t.marker}", t.marker, t.turns) for t in spec.tickets)
        named.append((f"spec-review-{spec.marker}", spec.marker, spec.review_turns))
    named.append(("ci-fix", REPAIR_MARKER, REPAIR_TURNS))
    sessions = [
        {
            "name": name,
            "marker": marker,
            "turns": [{**turn, "delay_ms": TURN_DELAY_MS} for turn in turns],
        }
        for name, marker, turns in named
    ]
    return {"final_text": "Nothing more to do.", "sessions": sessions}
