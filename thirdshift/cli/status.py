"""``thirdshift status``: what the daemons last said of themselves in this home, and what the
database holds now (Leases, Runs running, what was passed over)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import click

from thirdshift.cli.common import guarded, show
from thirdshift.console import format_duration
from thirdshift.records import Run
from thirdshift.run_states import RunKind


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for scripts.")
def status_command(as_json: bool) -> None:
    """What the daemons are doing: each daemon's polls, Runs, queue, Harness pauses and GitHub
    rate-limit budget (as it last wrote them in this home), and from the database the Leases
    held, the Runs running and what was passed over in the last day."""
    import json
    import os

    from thirdshift.bootstrap import status_facts
    from thirdshift.daemon.state import is_live
    from thirdshift.report import shapes

    facts = guarded(lambda: status_facts(os.environ))
    now, daemons, leases, running = facts.now, facts.daemons, facts.leases, facts.running
    usage, passed_over = facts.usage, facts.passed_over
    if as_json:
        show(
            json.dumps(
                {
                    "type": "status",
                    "version": 1,
                    # A file written before the daemon state had its type and version is the
                    # same shape, version 1.
                    "daemons": [
                        {"type": "daemon_state", "version": 1}
                        | state
                        | {"live": is_live(state, now)}
                        for state in daemons
                    ],
                    "leases": [shapes.lease_shape(lease, name) for name, lease in leases],
                    "running": [
                        shapes.run_shape(run, usage.get(run.id))
                        | {"tickets": list(facts.tickets.get(run.id, ()))}
                        for run in running
                    ],
                    "passed_over": [shapes.activity_shape(line) for line in passed_over],
                }
            )
        )
        return
    for said in status_lines(daemons, now):
        show(said)
    show("Leases held:" if leases else "Leases held: none")
    for name, lease in leases:
        by_run = f", Run {lease.run_id}" if lease.run_id else ""
        held = (
            f"{name} (Architect run)"
            if lease.issue_number is None
            else f"{name}#{lease.issue_number}"
        )
        show(
            f"  {held}: {lease.owner}{by_run}, until "
            f"{clock_time(lease.expires_at)} (fencing token {lease.fencing_token})"
        )
    show("Runs running:" if running else "Runs running: none")
    for line in running_lines(running, facts.tickets, now):
        show(line)
    show("Passed over in the last day:" if passed_over else "Passed over in the last day: none")
    for line in passed_over:
        reason = line.message.removeprefix("passed over: ")
        show(f"  {line.repository}#{line.issue_number}: {reason}")


def running_lines(
    running: Sequence[Run], tickets: Mapping[int, Sequence[str]], now: datetime
) -> list[str]:
    """The Runs running, a Spec run's Ticket Runs beneath it with a line per Ticket."""
    ids = {run.id for run in running}
    lines: list[str] = []

    def took(run: Run) -> str:
        return format_duration((now - run.started_at).total_seconds())

    for run in running:
        if run.parent_run_id in ids:
            continue  # under its Spec run
        if run.kind == RunKind.SPEC:
            lines.append(f"  Spec run {run.id} on {run.subject}, for {took(run)}")
            lines.extend(f"    Ticket {line}" for line in tickets.get(run.id, ()))
            lines.extend(
                f"    Run {child.id} on {child.subject} (its Ticket Run), for {took(child)}"
                for child in running
                if child.parent_run_id == run.id
            )
            continue
        lines.append(f"  Run {run.id} on {run.subject}, for {took(run)}")
    return lines


def status_lines(daemons: list[dict[str, Any]], now: Any) -> list[str]:
    """What each daemon last said of itself, as ``thirdshift status`` prints it."""
    from datetime import datetime

    from thirdshift.daemon.state import is_live

    if not daemons:
        return ["no daemon has run in this home (thirdshift daemon writes its state here)"]
    lines: list[str] = []
    for state in daemons:
        seen = datetime.fromisoformat(str(state["updated_at"]))
        if not is_live(state, now):
            lines.append(f"daemon {state['daemon']}: not running (last seen {clock_time(seen)})")
            continue
        since = datetime.fromisoformat(str(state["started_at"]))
        doing = "stopping, saving its Runs" if state.get("stopping") else "running"
        lines.append(
            f"daemon {state['daemon']} (pid {state['pid']}): {doing} since {clock_time(since)}"
        )
        for poll in state.get("repositories", []):
            last = poll.get("last_poll_at")
            upcoming = poll.get("next_poll_at")
            said = (
                f"last poll {clock_time(datetime.fromisoformat(last))}" if last else "no poll yet"
            )
            if poll.get("last_poll_error"):
                said += f" (failed: {poll['last_poll_error']})"
            if upcoming:
                said += f", next {clock_time(datetime.fromisoformat(upcoming))}"
            architect = poll.get("next_architect_at")
            if architect:
                said += f"; next Architect run {clock_time(datetime.fromisoformat(architect))}"
            queued = poll.get("queued") or []
            if queued:
                said += "; waiting for a slot: " + ", ".join(f"#{n}" for n in queued)
            lines.append(f"  {poll['repository']}: {said}")
        for run in state.get("running", []):
            started = datetime.fromisoformat(str(run["started_at"]))
            which = f"Run {run['run_id']}" if run.get("run_id") else "a Run starting"
            took = format_duration((now - started).total_seconds())
            what = (
                f"{run['repository']} (Architect run)"
                if run["issue_number"] == 0
                else f"{run['repository']}#{run['issue_number']}"
            )
            lines.append(f"  running: {what} ({which}, for {took})")
        for pause in state.get("pauses", []):
            until = clock_time(datetime.fromisoformat(str(pause["until"])))
            lines.append(f"  paused: {pause['harness']} ({pause['condition']}) until {until}")
        for gone in state.get("missing_harnesses", []):
            fix = str(gone["problem"]).partition("; ")[2]
            lines.append(
                f"  paused: {gone['harness']} (its CLI is not installed) until it is back; {fix}"
            )
        left = state.get("rate_limit_remaining")
        if left is not None:
            lines.append(f"  GitHub rate limit: {left} requests left")
    return lines


def clock_time(moment: Any) -> str:
    from datetime import UTC

    return str(moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
