"""``thirdshift demo`` (without ``--run``): the daemon at work on a sandbox of its own.

It prints the status page's address first, then starts the GitHub stand-in and the scripted
model server, creates a demo repository whose CI is green on main with a few Ready issues, and
runs ``thirdshift daemon`` on it with its status page: one issue is a plain fix; the other's
first attempt leaves CI red, so a CI-fix Repair answers it; the third is a Spec with two
Tickets, run as one Spec run (each Ticket merged into the Spec branch, then one Spec PR). When
every issue's Run has ended it stops the daemon and prints a summary table (issue, outcome,
pull request, sessions, time, cost; a Spec's Tickets beneath it) on stdout; with ``--keep`` it
serves on until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from thirdshift.bootstrap import run_daemon
from thirdshift.console import format_duration
from thirdshift.errors import SandboxError
from thirdshift.records import Run, UsageTotal
from thirdshift.report.reading import usage_by_run
from thirdshift.runs import FAILED_STATES
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.demo import (
    CHECK_COMMAND,
    CHECK_NAME,
    MAINTAINER,
    NAME,
    OWNER,
    READY_LABEL,
    agent_environment,
    model_script,
    rest,
)
from thirdshift.sandbox.github.server import GitHubStandIn
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer, codex_config_args
from thirdshift.settings import Settings
from thirdshift.store import Store

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


@dataclass(frozen=True)
class DaemonDemoSetup:
    """How the daemon demo runs: where, with which Harness, how often the daemon polls, how
    often the demo looks whether every issue is done, and whether the daemon keeps going after
    (until Ctrl-C or SIGTERM)."""

    root: Path | None = None
    harness: str = "claude"
    poll_seconds: float = 2
    watch_seconds: float = 1
    keep: bool = False


@dataclass(frozen=True)
class _DemoWorld:
    """The running sandbox as the demo's watch and summary need it."""

    api_url: str
    token: str
    numbers: tuple[int, ...]
    settings: Settings


def run_daemon_demo(
    setup: DaemonDemoSetup,
    progress: Callable[[str], None],
    interrupt: threading.Event,
    *,
    emit: Callable[[str], None],
) -> int:
    """Print the status page's address, set the sandbox up and run the daemon until every demo
    issue's Run has ended (then on, with ``keep``, until ``interrupt``); print the summary on
    ``emit``. 0 when every issue's Run succeeded."""
    root = Path(tempfile.mkdtemp(prefix="thirdshift-demo-")) if setup.root is None else setup.root
    root.mkdir(parents=True, exist_ok=True)
    port, page_token = _free_port(), secrets.token_urlsafe(32)
    # First thing, so a newcomer can open it and watch the daemon pick the issues up.
    progress(f"status page at http://127.0.0.1:{port}/?token={page_token}")
    script_path = root / "model-script.json"
    script_path.write_text(json.dumps(model_script(setup.harness, daemon_script()), indent=2))
    with (
        GitHubStandIn(root / "github") as stand_in,
        ScriptedModelServer(ModelScript.load(script_path), root / "model-requests.jsonl") as model,
    ):
        token, numbers = set_up_repository(root, stand_in.api_url, progress)
        world = _DemoWorld(
            stand_in.api_url,
            token,
            numbers,
            _settings(root, setup, stand_in.api_url, token, model.url, page_token),
        )
        watch = _Watch(world, setup, progress, emit, interrupt)
        watcher = threading.Thread(target=watch.until_done, name="thirdshift-demo", daemon=True)
        watcher.start()
        run_daemon(
            world.settings,
            repositories=[f"{OWNER}/{NAME}"],
            once=False,
            environ=dict(os.environ),
            agent_environ=agent_environment(
                os.environ, model.url, root / "agent-home", setup.harness
            ),
            progress=progress,
            stop=interrupt,
            http=f"127.0.0.1:{port}",
        )
        watcher.join(timeout=setup.watch_seconds + 30)
        return watch.summarize()


class _Watch:
    """Looks at the store until every demo issue's Run has ended, then prints the summary
    once and, unless the demo keeps going, stops the daemon."""

    def __init__(
        self,
        world: _DemoWorld,
        setup: DaemonDemoSetup,
        progress: Callable[[str], None],
        emit: Callable[[str], None],
        stop: threading.Event,
    ) -> None:
        self._world, self._setup = world, setup
        self._progress, self._emit, self._stop = progress, emit, stop
        self._lock = threading.Lock()
        self._status: int | None = None

    def until_done(self) -> None:
        """Look every ``watch_seconds`` until every demo issue's newest Run has ended."""
        while not self._stop.wait(self._setup.watch_seconds):
            runs = _latest_runs(self._world.settings, self._world.numbers)
            if len(runs) == len(self._world.numbers) and all(
                run.state != "running" for run in runs.values()
            ):
                self.summarize()
                if self._setup.keep:
                    self._progress("every demo issue is done; the daemon keeps going until Ctrl-C")
                else:
                    self._stop.set()
                return

    def summarize(self) -> int:
        """Print the summary (once) and return the demo's exit status."""
        with self._lock:
            if self._status is None:
                runs = _latest_runs(self._world.settings, self._world.numbers)
                for line in summary_lines(self._world, runs):
                    self._emit(line)
                ended = [runs.get(number) for number in self._world.numbers]
                succeeded = all(
                    r is not None and r.state not in {"running", *FAILED_STATES} for r in ended
                )
                self._status = 0 if succeeded else 1
            return self._status


def _free_port() -> int:
    """A port free on loopback now, for the status page: its address is printed before the
    servers start, so it cannot wait for the page's own bind."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _settings(
    root: Path, setup: DaemonDemoSetup, api_url: str, token: str, model_url: str, page: str
) -> Settings:
    """The demo daemon's own settings, built from these values alone (whatever the user's
    THIRDSHIFT_* variables and config file say): its home, the sandbox, short waits, the
    status page's token."""
    return Settings(
        home=root / "home",
        github_api_url=api_url,
        github_token=SecretStr(token),
        ci_grace_seconds=10,
        ci_poll_seconds=0.5,
        session_post_result_seconds=15,
        poll_seconds=setup.poll_seconds,
        poll_jitter_seconds=0,
        settle_seconds=0,
        max_runs=len(DEMO_ISSUES) + len(DEMO_SPECS),
        max_runs_per_repository=len(DEMO_ISSUES) + len(DEMO_SPECS),
        http_token=SecretStr(page),
        harness=setup.harness,
        harness_options=(
            {"codex": codex_config_args(model_url)} if setup.harness == "codex" else {}
        ),
    )


def set_up_repository(
    root: Path, api_url: str, progress: Callable[[str], None]
) -> tuple[str, tuple[int, ...]]:
    """The maintainer's token and the numbers of the Ready issues filed on a new demo
    repository of the running stand-in."""
    token = "demo_" + secrets.token_hex(16)
    client = SandboxClient(api_url)
    full_name = f"{OWNER}/{NAME}"
    client.add_user(MAINTAINER, token, {full_name: "write"})
    source = root / "source"
    source.mkdir(exist_ok=True)
    for relative, text in PROJECT_FILES.items():
        (source / relative).write_text(text)
    client.add_repo(OWNER, NAME, source, {CHECK_NAME: CHECK_COMMAND})
    progress(f"GitHub stand-in: {api_url}; repository {full_name}, check '{CHECK_NAME}'")
    rest(
        api_url,
        token,
        "POST",
        f"/repos/{full_name}/labels",
        {"name": READY_LABEL, "color": "0e8a16", "description": "thirdshift may take this"},
    )
    numbers = []
    for issue in DEMO_ISSUES:
        filed = rest(
            api_url,
            token,
            "POST",
            f"/repos/{full_name}/issues",
            {"title": issue.title, "body": issue.body},
        )
        # Labelled after filing, as a maintainer does: the labelled event names who did it.
        rest(
            api_url,
            token,
            "POST",
            f"/repos/{full_name}/issues/{filed['number']}/labels",
            {"labels": [READY_LABEL]},
        )
        numbers.append(int(filed["number"]))
        progress(f"issue #{filed['number']} '{issue.title}', labelled {READY_LABEL}")
    for spec in DEMO_SPECS:
        numbers.append(_file_spec(api_url, token, spec, progress))
    env_file = root / "demo.env"
    # The sandbox token is throwaway, but it still goes to a private file, not to the screen.
    env_file.write_text(
        f"export THIRDSHIFT_GITHUB_API_URL={api_url}\nexport GITHUB_TOKEN={token}\n"
    )
    os.chmod(env_file, 0o600)
    progress(f"to look around with the maintainer's token: source {env_file}")
    return token, tuple(numbers)


def _file_spec(api_url: str, token: str, spec: DemoSpec, progress: Callable[[str], None]) -> int:
    """The Spec filed and labelled Ready, its Tickets filed as its sub-issues (unlabelled),
    each blocked by the one before it; the Spec's number."""
    full_name = f"{OWNER}/{NAME}"

    def filed(title: str, body: str) -> dict[str, Any]:
        made = rest(
            api_url, token, "POST", f"/repos/{full_name}/issues", {"title": title, "body": body}
        )
        assert isinstance(made, dict)
        return made

    number = int(filed(spec.title, spec.body)["number"])
    tickets: list[dict[str, Any]] = []
    for ticket in spec.tickets:
        made = filed(ticket.title, ticket.body)
        rest(
            api_url,
            token,
            "POST",
            f"/repos/{full_name}/issues/{number}/sub_issues",
            {"sub_issue_id": int(made["id"])},
        )
        if tickets:
            rest(
                api_url,
                token,
                "POST",
                f"/repos/{full_name}/issues/{made['number']}/dependencies/blocked_by",
                {"issue_id": int(tickets[-1]["id"])},
            )
        tickets.append(made)
    rest(
        api_url,
        token,
        "POST",
        f"/repos/{full_name}/issues/{number}/labels",
        {"labels": [READY_LABEL]},
    )
    listed = ", ".join(f"#{t['number']}" for t in tickets)
    progress(
        f"issue #{number} '{spec.title}', a Spec with the Tickets {listed}, labelled {READY_LABEL}"
    )
    return number


def _latest_runs(settings: Settings, numbers: Sequence[int]) -> dict[int, Run]:
    """Each demo issue's newest Run, by issue number (an issue with none is left out)."""
    store = Store.open(settings.effective_database_url)
    try:
        runs = store.list_runs(limit=100, repository=f"{OWNER}/{NAME}")
    finally:
        store.close()
    latest: dict[int, Run] = {}
    for run in runs:  # newest first
        if run.issue_number in numbers and run.kind != "architect" and run.parent_run_id is None:
            latest.setdefault(run.issue_number, run)
    return latest


def _ticket_runs(store: Store, spec_run: Run) -> list[Run]:
    """A Spec run's Tickets, each by the Ticket Run that landed it, else its newest one in
    this Spec run, lowest Ticket first."""
    landed = store.landed_tickets(spec_run.repository, spec_run.issue_branch or "")
    newest = {run.issue_number: run for run in store.ticket_runs(spec_run.id)}
    return [landed.get(n) or newest[n] for n in sorted({*landed, *newest})]


SUMMARY_HEADER = ("issue", "outcome", "pull request", "sessions", "time", "cost")


def summary_lines(world: _DemoWorld, runs: dict[int, Run]) -> list[str]:
    """The summary table: a row per demo issue, its columns aligned."""
    store = Store.open(world.settings.effective_database_url)
    try:
        tickets = {run.id: _ticket_runs(store, run) for run in runs.values() if run.kind == "spec"}
        shown = [*runs.values(), *(t for listed in tickets.values() for t in listed)]
        usage = usage_by_run(store, shown)
    finally:
        store.close()
    rows: list[tuple[str, ...]] = [SUMMARY_HEADER]
    for number in world.numbers:
        run = runs.get(number)
        if run is None:
            rows.append((f"#{number}", "not started", "-", "0", "-", "-"))
            continue
        rows.append(_row(world, f"#{number}", run, usage.get(run.id)))
        for ticket in tickets.get(run.id, ()):
            name = f"#{ticket.issue_number} (Ticket of #{number})"
            rows.append(_row(world, name, ticket, usage.get(ticket.id)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(SUMMARY_HEADER))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _row(world: _DemoWorld, issue: str, run: Run, total: UsageTotal | None) -> tuple[str, ...]:
    """A row of the summary: a Ticket Run that landed its Ticket says so."""
    took = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    cost = f"${total.cost_usd:.4f}" if total and total.unpriced_sessions == 0 else "-"
    outcome = "landed" if run.landed_sha else run.state
    return (
        issue,
        outcome if run.cause is None else f"{outcome} ({run.cause})",
        _pull_url(world, run.pull_request_number),
        str(total.sessions if total else 0),
        format_duration(took) if took is not None else "running",
        cost,
    )


def _pull_url(world: _DemoWorld, number: int | None) -> str:
    if number is None:
        return "-"
    try:
        pull = rest(world.api_url, world.token, "GET", f"/repos/{OWNER}/{NAME}/pulls/{number}")
    except SandboxError:
        return f"#{number}"
    return str(pull["html_url"])
