"""The lines people read: ``thirdshift runs`` (one line per Run) and ``thirdshift show`` (one
Run whole). Pure: records in, text out; ``shapes`` is the same data for scripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from thirdshift.console import format_duration
from thirdshift.records import Activity, Lease, Run, SessionRecord, UsageTotal
from thirdshift.report.shapes import iso, seconds_between
from thirdshift.run_states import RunEnd, RunKind, RunState

PROMPT_LINES = 12
"""How many lines of each session's prompt ``show`` prints (``--json`` has it whole)."""
LINE_WIDTH = 160
CAUSE_WIDTH = 100


def stamp(moment: datetime | None) -> str:
    """``2026-03-01 23:00:05 UTC`` (``-`` for none)."""
    text = iso(moment)
    return "-" if text is None else text[:19].replace("T", " ") + " UTC"


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, an ellipsis where it was cut."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def outcome(run: Run) -> str:
    """How the Run ended: ``ready``, ``merged``, ``failed: <cause>``, ``Policy refusal:
    <cause>``, ``crashed: <cause>``, or ``running``."""
    if run.state == RunState.SUCCEEDED:
        return RunEnd.MERGED if run.kind == RunKind.MERGE else RunEnd.READY
    if run.state == RunState.REFUSED:
        return f"Policy refusal: {run.cause or 'no cause recorded'}"
    if run.state in (RunState.FAILED, RunState.CRASHED):
        return f"{run.state}: {run.cause or 'no cause recorded'}"
    return run.state


def ending(run: Run) -> str:
    """What ``runs`` prints beside the state: ``ready`` or ``merged``, the cause of a Run that
    did not succeed, ``-`` while it runs."""
    if run.state in (RunState.FAILED, RunState.CRASHED):
        return run.cause or "no cause recorded"
    return "-" if run.state == RunState.RUNNING else outcome(run)


def cost(total: UsageTotal | None) -> str:
    """``$0.0123``, ``$0.0123 + unpriced`` when some session has no cost figure, ``-`` before
    any session."""
    if total is None:
        return "-"
    return f"${total.cost_usd:.4f}" + (" + unpriced" if total.unpriced_sessions else "")


def harnesses(run: Run, total: UsageTotal | None) -> str:
    """Each Harness the Run's sessions used with the model their streams reported, else what
    the Run was started with."""
    if total is not None and total.harnesses:
        return ", ".join(total.harnesses)
    if run.harness is None:
        return "-"
    return run.harness + (f" ({run.model})" if run.model else "")


def duration(start: datetime, end: datetime | None) -> str:
    took = seconds_between(start, end)
    return "running" if took is None else format_duration(took)


def kind(run: Run) -> str:
    """The Run's kind, a Ticket Run's with its Spec run: ``merge, Ticket of Spec run 12``."""
    if run.parent_run_id is not None:
        return f"{run.kind}, Ticket of Spec run {run.parent_run_id}"
    return run.kind


def run_line(run: Run, total: UsageTotal | None) -> str:
    """One Run on one line, as ``thirdshift runs`` prints it."""
    pull = f"PR #{run.pull_request_number}" if run.pull_request_number else "no PR"
    return "  ".join(
        (
            f"Run {run.id}",
            run.subject,
            kind(run),
            run.state,
            cut(ending(run), CAUSE_WIDTH),
            pull,
            stamp(run.started_at),
            duration(run.started_at, run.ended_at),
            harnesses(run, total),
            cost(total),
        )
    )


def session_name(session: SessionRecord, by_id: Mapping[int, SessionRecord]) -> str:
    resumed = by_id.get(session.resumed_from_id) if session.resumed_from_id else None
    return session.kind + (f" (resumes session {resumed.id}, {resumed.kind})" if resumed else "")


@dataclass(frozen=True)
class SpecTree:
    """A Spec run's Tickets for ``show``: its Ticket Runs oldest first, the Tickets landed in
    its Spec branch (by it or an earlier Spec run), and the whole Spec run's cost (its own
    sessions and every Ticket Run's). For a Ticket Run: its Spec run."""

    tickets: tuple[Run, ...] = ()
    landed: Mapping[int, Run] = field(default_factory=dict)
    cost_usd: float | None = None
    spec_run: Run | None = None


NO_TREE = SpecTree()


def tree_head(run: Run, tree: SpecTree) -> list[str]:
    """A Ticket Run's Spec run and its landing; a Spec run's whole cost."""
    lines: list[str] = []
    if tree.spec_run is not None:
        spec = tree.spec_run
        lines.append(f"  Spec run: Run {spec.id} on {spec.subject}, {spec.state}")
    if run.landed_sha:
        lines.append(f"  landed: {run.landed_sha[:12]} at {stamp(run.landed_at)}")
    if run.kind == RunKind.SPEC and tree.cost_usd is not None:
        lines.append(f"  cost of the whole Spec run (its Tickets too): ${tree.cost_usd:.4f}")
    return lines


def ticket_numbers(tree: SpecTree) -> list[int]:
    """The Tickets of a Spec run's tree, lowest number first: landed, or run by it."""
    return sorted({*tree.landed, *(ticket.issue for ticket in tree.tickets)})


def ticket_status(run: Run, number: int, tree: SpecTree) -> tuple[str, tuple[Run, ...]]:
    """How Ticket ``number`` of Spec run ``run`` stands (landed by which Run, else how its
    newest Ticket Run ended), and its Ticket Runs in this Spec run, oldest first."""
    runs = tuple(ticket for ticket in tree.tickets if ticket.issue == number)
    landed = tree.landed.get(number)
    if landed is not None:
        pull = f", PR #{landed.pull_request_number}" if landed.pull_request_number else ""
        where = "" if landed.parent_run_id == run.id else f" (Spec run {landed.parent_run_id})"
        return f"landed by Run {landed.id}{where}{pull}", runs
    status = runs[-1].state + (f": {cut(runs[-1].cause, CAUSE_WIDTH)}" if runs[-1].cause else "")
    return status, runs


def tree_lines(run: Run, tree: SpecTree, usage: Mapping[int, UsageTotal]) -> list[str]:
    """A Spec run's Tickets, each with how it stands and its Ticket Runs in this Spec run."""
    if run.kind != RunKind.SPEC:
        return []
    lines: list[str] = []
    numbers = ticket_numbers(tree)
    lines.append(f"Tickets ({len(numbers)}):")
    for number in numbers:
        status, runs = ticket_status(run, number, tree)
        lines.append(f"  #{number}: {status}")
        lines.extend(f"    {run_line(ticket, usage.get(ticket.id))}" for ticket in runs)
    if not numbers:
        lines.append("  none yet")
    return lines


def show_lines(
    run: Run,
    *,
    usage: Mapping[int, UsageTotal],
    lease: Lease | None,
    sessions: Sequence[SessionRecord],
    earlier_runs: Sequence[Run],
    activity: Sequence[Activity],
    prompt_lines: int = PROMPT_LINES,
    tree: SpecTree = NO_TREE,
) -> list[str]:
    """One Run whole, as ``thirdshift show`` prints it (a Spec run with its Tickets)."""
    total = usage.get(run.id)
    lines = [
        f"Run {run.id}: {run.subject} ({kind(run)}), {run.state}",
        f"  outcome: {outcome(run)}",
        f"  started: {stamp(run.started_at)}",
        f"  ended: {stamp(run.ended_at)} ({duration(run.started_at, run.ended_at)})",
        f"  Harness: {harnesses(run, total)}",
        f"  Base branch: {run.base_branch or '-'}",
        f"  Issue branch: {run.issue_branch or '-'}",
        f"  head: {run.head_sha or '-'}",
        f"  pull request: #{run.pull_request_number}"
        if run.pull_request_number
        else "  pull request: none",
    ]
    lines.extend(tree_head(run, tree))
    if run.killed_work:
        lines.append(f"  killed work: {cut(run.killed_work, LINE_WIDTH)}")
    if run.published:
        lines.append(f"  published: {', '.join(f'#{n}' for n in run.published)}")
    if run.last_session_log:
        lines.append(f"  last Session log: {run.last_session_log}")
    if lease is None:
        lines.append("  Lease: none")
    else:
        lines.append(
            f"  Lease: {lease.owner}, fencing token {lease.fencing_token}, Run "
            f"{lease.run_id if lease.run_id is not None else '-'}, until {stamp(lease.expires_at)}"
        )
    if total is None:
        lines.append("  cost: - (no sessions)")
    else:
        lines.append(
            f"  cost: {cost(total)}, {total.sessions} session(s), {total.input_tokens} tokens in "
            f"({total.cached_input_tokens} cached), {total.output_tokens} out, {total.turns} turns"
        )
    lines.extend(tree_lines(run, tree, usage))
    lines.append(f"Sessions ({len(sessions)}):")
    by_id = {session.id: session for session in sessions}
    for number, session in enumerate(sessions, start=1):
        lines.extend(_session_lines(number, session, by_id, prompt_lines))
    if not sessions:
        lines.append("  none")
    lines.append(f"Earlier Runs on {run.subject} ({len(earlier_runs)}):")
    lines.extend(f"  {run_line(earlier, usage.get(earlier.id))}" for earlier in earlier_runs)
    if not earlier_runs:
        lines.append("  none")
    lines.append(f"Activity ({len(activity)}):")
    lines.extend(
        f"  {stamp(line.created_at)} {line.kind}: {cut(line.message, LINE_WIDTH)}"
        for line in activity
    )
    if not activity:
        lines.append("  none")
    return lines


def _session_lines(
    number: int, session: SessionRecord, by_id: Mapping[int, SessionRecord], prompt_lines: int
) -> list[str]:
    model = session.usage.model or session.model
    lines = [
        f"  {number}. {session_name(session, by_id)}: {session.harness}"
        + (f" ({model})" if model else "")
        + f", {session.state}, {duration(session.started_at, session.ended_at)}, "
        + session.usage.describe(),
        f"     started: {stamp(session.started_at)}",
        f"     Session log: {session.log_path}",
    ]
    if session.error:
        lines.append(f"     error: {cut(session.error, LINE_WIDTH)}")
    if session.killed_work:
        lines.append(f"     killed work: {cut(session.killed_work, LINE_WIDTH)}")
    prompt = session.prompt.splitlines()
    shown = prompt[:prompt_lines]
    lines.append(f"     prompt ({len(prompt)} lines):")
    lines.extend(f"       | {_bounded(line.rstrip())}".rstrip() for line in shown)
    if len(prompt) > len(shown):
        lines.append(
            f"       | … {len(prompt) - len(shown)} more line(s): `thirdshift show "
            f"{session.run_id} --json` has the whole prompt"
        )
    return lines


def _bounded(line: str) -> str:
    """A prompt line as written (its indentation kept), cut at ``LINE_WIDTH``."""
    return line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 1] + "…"
