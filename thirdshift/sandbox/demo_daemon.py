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

from thirdshift.bootstrap import check_demo_harness, run_daemon
from thirdshift.console import format_duration
from thirdshift.errors import SandboxError
from thirdshift.records import Run, UsageTotal
from thirdshift.report.reading import usage_by_run
from thirdshift.run_states import FAILED_ENDS, RunKind, RunState
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
from thirdshift.sandbox.demo_issues import (
    DEMO_ISSUES,
    DEMO_SPECS,
    PROJECT_FILES,
    DemoSpec,
    daemon_script,
)
from thirdshift.sandbox.github.server import GitHubStandIn
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer, codex_config_args
from thirdshift.settings import Settings
from thirdshift.store import Store


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
    check_demo_harness(setup.harness, os.environ)  # before any server or the page's address
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
                run.state != RunState.RUNNING for run in runs.values()
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
                    r is not None and r.state not in {RunState.RUNNING, *FAILED_ENDS} for r in ended
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
            latest.setdefault(run.issue, run)
    return latest


def _ticket_runs(store: Store, spec_run: Run) -> list[Run]:
    """A Spec run's Tickets, each by the Ticket Run that landed it, else its newest one in
    this Spec run, lowest Ticket first."""
    landed = store.landed_tickets(spec_run.repository, spec_run.issue_branch or "")
    newest = {run.issue: run for run in store.ticket_runs(spec_run.id)}
    return [landed.get(n) or newest[n] for n in sorted({*landed, *newest})]


SUMMARY_HEADER = ("issue", "outcome", "pull request", "sessions", "time", "cost")


def summary_lines(world: _DemoWorld, runs: dict[int, Run]) -> list[str]:
    """The summary table: a row per demo issue, its columns aligned."""
    store = Store.open(world.settings.effective_database_url)
    try:
        tickets = {
            run.id: _ticket_runs(store, run) for run in runs.values() if run.kind == RunKind.SPEC
        }
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
