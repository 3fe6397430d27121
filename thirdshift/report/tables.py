"""The tables ``thirdshift report`` prints: one per repository, a column per Harness, a line
per figure, then each Harness's Failed runs by cause. Pure: a ``PeriodReport`` in, lines out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thirdshift.console import format_duration
from thirdshift.figures import OUTCOMES
from thirdshift.report.period import HarnessRow, PeriodReport
from thirdshift.report.views import cut, stamp

CAUSES_SHOWN = 5
"""How many causes the text gives per Harness, most frequent first (``--json`` has them all)."""
CAUSE_WIDTH = 100


def report_lines(report: PeriodReport) -> list[str]:
    """The report as people read it: a table per repository, a column per Harness, then each
    Harness's Failed runs by cause."""
    where = f" on {report.repository}" if report.repository else ""
    lines = [f"Runs started{where} from {stamp(report.since)} to {stamp(report.until)}"]
    if not report.rows:
        lines.append("no Runs started in that time")
    for repository, rows in report.repositories():
        lines.append("")
        lines.extend(_table(repository, rows))
        lines.extend(_causes(rows))
    return lines


def _table(repository: str, rows: Sequence[HarnessRow]) -> list[str]:
    table: list[tuple[str, list[str]]] = [("Runs", [str(row.runs) for row in rows])]
    for place, outcome in enumerate(OUTCOMES):
        if any(row.outcomes[place][1] for row in rows):
            table.append((f"  {outcome}", [str(row.outcomes[place][1]) for row in rows]))
    figures: list[tuple[str, Callable[[HarnessRow], str]]] = [
        ("pull requests ready", lambda row: str(row.pull_requests_ready)),
        ("pull requests merged", lambda row: str(row.pull_requests_merged)),
        ("Repairs per Run", lambda row: _number(row.repairs_per_run)),
        ("Runs with a Repair", lambda row: str(row.spend.repaired_runs)),
        ("cost", lambda row: _usd(row.spend.cost_usd)),
        ("cost per Run", lambda row: _usd(row.cost_per_run)),
        ("cost per pull request", lambda row: _usd(row.cost_per_pull_request)),
        ("unpriced sessions", lambda row: str(row.spend.unpriced_sessions)),
        ("session time, median", lambda row: _took(row.session_time.median_seconds)),
        ("session time, p90", lambda row: _took(row.session_time.p90_seconds)),
        ("label to ready, median", lambda row: _took(row.label_to_ready.median_seconds)),
        ("label to ready, p90", lambda row: _took(row.label_to_ready.p90_seconds)),
        ("ready, label time unknown", lambda row: str(row.label_to_ready.unknown)),
    ]
    table.extend((name, [figure(row) for row in rows]) for name, figure in figures)
    heads = [row.harness or "-" for row in rows]
    first = max(len(repository), *(len(name) + 2 for name, _ in table))
    widths = [
        max(len(head), *(len(values[i]) for _, values in table)) for i, head in enumerate(heads)
    ]
    lines = [_line(repository, heads, first, widths)]
    lines.extend(_line(f"  {name}", values, first, widths) for name, values in table)
    return lines


def _line(name: str, cells: Sequence[str], first: int, widths: Sequence[int]) -> str:
    padded = (f"  {cell.rjust(width)}" for cell, width in zip(cells, widths, strict=True))
    return (name.ljust(first) + "".join(padded)).rstrip()


def _causes(rows: Sequence[HarnessRow]) -> list[str]:
    lines: list[str] = []
    for row in rows:
        if not row.causes:
            continue
        harness = row.harness or "-"
        lines.append(f"  Failed runs by cause, {harness} ({row.failed_runs}):")
        for cause in row.causes[:CAUSES_SHOWN]:
            text = cut(cause.cause, CAUSE_WIDTH) if cause.cause else "no cause recorded"
            lines.append(f"    {cause.runs:>4}  {text}")
        rest = row.causes[CAUSES_SHOWN:]
        if rest:
            lines.append(
                f"    {sum(c.runs for c in rest):>4}  under {len(rest)} other cause(s) "
                "(--json has them all)"
            )
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _took(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)
