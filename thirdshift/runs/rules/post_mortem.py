"""The Post-mortem: what a person reads about a Run's end, built from the database.

Pure functions of plain records: the last condensed lines of the Run's last Session (its
Session events, each as the progress lines and ``thirdshift logs`` show it), the Run's history in
one line per Session (kind, Harness, state, duration, cost from the usage ledger), and how to see
more. The Failed-run comment shows it in Markdown; notifications carry its short form; and the
message a notification target gets is built here too (``run_end_notification``).

Session events, not the Session log, because the events are the conversation as the database
keeps it (ADR 0001): already condensed and scrubbed by the Harness's reader, with the tool
results and errors that progress lines leave out, and readable without the Harness adapters (a
Run reaches those only through its seams, ADR 0008).

Every text is scrubbed before it is cut, and every part has a bound, so the whole stays far
below GitHub's 65,536-character limit on a comment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thirdshift.defang import defanged
from thirdshift.records import Notification, SessionEvent, SessionRecord
from thirdshift.run_states import RunEnd, RunKind

LAST_LINES = 15  # condensed Session lines shown
LINE_CHARS = 240  # each one, at most
HISTORY_SESSIONS = 20  # sessions in the history; older ones are counted
CAUSE_CHARS = 2000
SHORT_LINES = 5  # condensed lines in the short form
SHORT_CHARS = 2000  # the short form, at most


@dataclass(frozen=True)
class PostMortem:
    """A Run's end as people read it. ``last_session`` is the kind of the Session whose
    ``last_lines`` are shown (None when no Session ran); ``earlier_sessions`` counts the sessions
    left out of ``history``."""

    run_id: int
    cause: str | None
    history: tuple[str, ...]
    earlier_sessions: int
    last_session: str | None
    last_lines: tuple[str, ...]


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def condensed(event: SessionEvent) -> str:
    """One Session event as a line: a tool call as its progress line (``$ pytest -q``,
    ``edit calc.py``), what came back indented under it (with a failing exit status), the
    agent's messages, its result and errors marked."""
    summary = " ".join(event.summary.split())
    if event.kind == "tool_call":
        return summary
    if event.kind == "tool_result":
        status = f"exit {event.exit_status}: " if event.exit_status else ""
        return f"  ↳ {status}{summary}"
    if event.kind == "message":
        return f"agent: {summary}"
    if event.kind == "result":
        return f"result: {summary}"
    if event.kind == "error":
        return f"error: {summary}"
    return f"{event.kind}: {summary}"


def duration(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``1h 02m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def history_line(session: SessionRecord) -> str:
    """``implement · claude (claude-sonnet-4) · ended · 1m 12s · $0.0123``."""
    model = session.usage.model or session.model
    harness = f"{session.harness} ({model})" if model else session.harness
    took = (
        duration((session.ended_at - session.started_at).total_seconds())
        if session.ended_at is not None
        else "still running"
    )
    usage = session.usage
    if usage.cost_usd is not None:
        priced = " (priced by thirdshift)" if usage.cost_source == "price table" else ""
        cost = f"${usage.cost_usd:.4f}{priced}"
    else:
        cost = "no cost reported"
    return f"{session.kind} · {harness} · {session.state} · {took} · {cost}"


def post_mortem(
    run_id: int,
    cause: str | None,
    sessions: Sequence[SessionRecord],
    last_events: Sequence[SessionEvent],
    scrub: Callable[[str], str],
) -> PostMortem:
    """The Post-mortem of Run ``run_id`` from its sessions (oldest first) and the last Session's
    newest events (oldest first). Scrubbed first, then cut."""
    shown = sessions[-HISTORY_SESSIONS:]
    lines = [condensed(event) for event in last_events[-LAST_LINES:]]
    return PostMortem(
        run_id=run_id,
        cause=cut(scrub(cause), CAUSE_CHARS) if cause else None,
        history=tuple(cut(scrub(history_line(s)), LINE_CHARS) for s in shown),
        earlier_sessions=len(sessions) - len(shown),
        last_session=sessions[-1].kind if sessions else None,
        last_lines=tuple(cut(scrub(line), LINE_CHARS) for line in lines),
    )


def fenced(lines: Sequence[str]) -> str:
    """``lines`` in a code block whose fence no line can close early."""
    longest = max((run for line in lines for run in _backtick_runs(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n" + "\n".join(lines) + f"\n{fence}"


def _backtick_runs(line: str) -> list[int]:
    runs, count = [], 0
    for char in line + " ":
        if char == "`":
            count += 1
        elif count:
            runs.append(count)
            count = 0
    return runs


def see_more(run_id: int) -> str:
    return (
        f"`thirdshift show {run_id}` (the whole Run) and `thirdshift logs {run_id}` "
        "(its Session logs as readable lines)"
    )


def run_page_url(public_url: str | None, run_id: int) -> str | None:
    """The Run's page on the status page, ``<public_url>/runs/<id>``; None without a
    ``public_url`` (thirdshift's texts then link nothing)."""
    return None if public_url is None else f"{public_url}/runs/{run_id}"


def run_page_part(url: str) -> str:
    """The Failed-run comment's link to the Run's page."""
    return f"**The Run's page:** {url} (its timeline, each Session replayed, its Session logs)."


def markdown(report: PostMortem, log_name: str | None) -> list[str]:
    """The Post-mortem's parts of the Failed-run comment (the cause comes before them)."""
    parts: list[str] = []
    if report.last_session is None:
        parts.append("**What the agent did last:** no Session ran.")
    elif report.last_lines:
        parts.append(
            f"**What the agent did last** (Session `{report.last_session}`):\n\n"
            + fenced(report.last_lines)
        )
    else:
        parts.append(
            f"**What the agent did last:** Session `{report.last_session}` recorded no events."
        )
    if report.history:
        earlier = (
            [f"- …and {report.earlier_sessions} earlier Sessions"]
            if report.earlier_sessions
            else []
        )
        listed = "\n".join([*earlier, *(f"- {_code(line)}" for line in report.history)])
        parts.append(
            f"**The Run's Sessions** (kind · Harness · state · duration · cost):\n\n{listed}"
        )
    log = f"; the last Session log is `{log_name}`" if log_name else ""
    parts.append(f"**See more:** {see_more(report.run_id)}{log}.")
    return parts


def _code(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds."""
    longest = max(_backtick_runs(text), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def short_form(report: PostMortem) -> str:
    """Plain text for a notification: the history, the last few lines, where to see more."""
    lines = [f"Sessions: {len(report.history) + report.earlier_sessions}"]
    lines += [f"  {line}" for line in report.history[-5:]]
    if report.last_lines:
        lines.append(f"Last lines of {report.last_session}:")
        lines += [f"  {line}" for line in report.last_lines[-SHORT_LINES:]]
    lines.append(f"See more: thirdshift show {report.run_id}; thirdshift logs {report.run_id}")
    return cut("\n".join(lines), SHORT_CHARS)


@dataclass(frozen=True)
class AnnouncedEnd:
    """How one Run ended, as its announcement tells it: ``state`` (ready, merged, refused,
    failed, interrupted; an Architect run's published, covered), why, the pull request and the
    Post-mortem (None: read when it is announced)."""

    issue_url: str
    state: RunEnd
    cause: str | None = None
    pull_request_url: str | None = None
    report: PostMortem | None = None


def run_end_notification(
    *,
    run_id: int,
    repository: str,
    issue_number: int | None,
    kind: RunKind,
    end: AnnouncedEnd,
    cost_usd: float | None,
    tickets: tuple[str, ...] = (),
) -> Notification:
    """The message of a Run's end (a Spec run's with a line per Ticket)."""
    issue_url, state, cause, report = end.issue_url, end.state, end.cause, end.report
    pull_request_url = end.pull_request_url
    return Notification(
        event="run.ended",
        repository=repository,
        issue_number=issue_number,
        issue_url=issue_url,
        state=state,
        run_id=run_id,
        kind=kind,
        # The agent's words (the CLI's stderr, its last lines) go on to people and to whatever
        # a webhook's receiver posts them: defanged like the Failed-run comment.
        cause=defanged(cut(cause, CAUSE_CHARS)) if cause else None,
        pull_request_url=pull_request_url,
        cost_usd=cost_usd,
        post_mortem=defanged(short_form(report)) if report is not None else None,
        tickets=tuple(defanged(cut(line, CAUSE_CHARS)) for line in tickets),
    )
