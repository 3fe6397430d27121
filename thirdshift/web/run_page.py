"""A Run's own page on the status page, ``/runs/<id>``: its record, Lease and outcome, a
timeline of its Sessions, its Repairs, a Spec run's Tickets (a Ticket Run's Spec run), and a
replay of each Session from its Session events, with the Session log to download from
``/runs/<id>/sessions/<session id>/log``.

Read from the store as ``thirdshift show`` reads it (``report.reading``) and worded as ``show``
and the Post-mortem word it (``report.views``, ``runs.rules.post_mortem``). The store keeps its
texts scrubbed and the Session logs are written scrubbed; every text here passes through the
page's scrubber once more on its way out all the same. Everything an agent wrote stays text:
the template escapes it, and the timeline's figures reach its script as JSON.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thirdshift.records import Lease, Run, SessionEvent, SessionRecord, UsageTotal
from thirdshift.report import reading, views
from thirdshift.run_states import RunKind
from thirdshift.runs.rules import condensed, history_line
from thirdshift.store import Store

REPLAY_EVENTS = 600
"""Session events a replay shows at most: the first and the last half of them, and how many
were left out between (the Session log has every line)."""
PROMPT_LINES = 60
"""Lines of a session's prompt the replay shows (``thirdshift show --json`` has it whole)."""
LOG_TYPE = "application/x-ndjson"
"""A Session log is JSON Lines."""
NOTE_WIDTH = 160

Scrub = Callable[[str], str]

LARGEST_ID = 2**63 - 1
"""The largest row id either database keeps: a larger one in an address is no Run (SQLite would
not even take it as a parameter)."""


@dataclass(frozen=True)
class Field:
    """One line of the Run's record: its label, its value, and where the value links to."""

    label: str
    value: str
    href: str | None = None


@dataclass(frozen=True)
class RunLink:
    """Another Run the page names (a Ticket Run, its Spec run, an earlier Run), linked to its
    page: ``note`` is how it ended, or ``-`` while it runs."""

    run_id: int
    subject: str
    state: str
    note: str


@dataclass(frozen=True)
class TicketNode:
    """One Ticket of a Spec run: how it stands, and its Ticket Runs in this Spec run."""

    number: int
    status: str
    landed_by: RunLink | None
    """The Ticket Run that landed it (maybe of an earlier Spec run), once it landed."""
    runs: tuple[RunLink, ...]


@dataclass(frozen=True)
class ReplayLine:
    """One Session event as the replay reads: ``text`` as a Post-mortem line reads it (a tool
    call as its progress line, a result's first line, the agent's messages), and ``detail``,
    the whole command or path, when the line shows less of it. ``kind`` ``gap`` stands for the
    events left out of a long session."""

    seq: int
    kind: str
    text: str
    detail: str | None = None
    failed: bool = False


@dataclass(frozen=True)
class SessionView:
    """One Session of the Run: where it sits on the timeline (seconds since the Run started;
    a session still running reaches the page's moment), what it used, and its replay."""

    session_id: int
    number: int
    name: str
    """Its Session kind, and for a Resume which session it resumes."""
    kind: str
    harness: str
    model: str | None
    state: str
    summary: str
    """``claude (model) · ended · 1m 12s · $0.0123``, as the Post-mortem's history says."""
    started: str
    start_seconds: float
    end_seconds: float
    running: bool
    tokens: int | None
    cost_usd: float | None
    error: str | None
    killed_work: str | None
    final_message: str | None
    prompt: tuple[str, ...]
    prompt_lines: int
    events: int
    lines: tuple[ReplayLine, ...]
    log_name: str

    @property
    def repair(self) -> bool:
        """A Repair (``repair-<i>``) or a Review Repair (``review-<i>``), or its Resume."""
        return self.kind.startswith(("repair-", "review-"))

    @property
    def tool_calls(self) -> int:
        return sum(line.kind == "tool_call" for line in self.lines)

    def bar(self) -> dict[str, Any]:
        """Its bar on the timeline, as the page's script draws it."""
        return {
            "label": f"{self.number}. {self.kind}",
            "start": self.start_seconds,
            "end": self.end_seconds,
            "harness": self.harness,
            "model": self.model,
            "state": self.state,
            "running": self.running,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True)
class RunPage:
    """A Run's page at one moment. ``found`` False: the database has no Run by that id;
    ``database_error``: it could not be read (``database unreachable: ...``)."""

    run_id: int
    generated_at: datetime
    found: bool = True
    database_error: str | None = None
    subject: str = ""
    kind: str = ""
    state: str = ""
    outcome: str = ""
    head: str = "-"
    fields: tuple[Field, ...] = ()
    lease: str | None = None
    spec_run: RunLink | None = None
    tickets: tuple[TicketNode, ...] = ()
    sessions: tuple[SessionView, ...] = ()
    earlier: tuple[RunLink, ...] = ()
    activity: tuple[str, ...] = ()

    @property
    def status(self) -> int:
        """The HTTP status the page is answered with."""
        if self.database_error is not None:
            return 503
        return 200 if self.found else 404

    @property
    def is_spec_run(self) -> bool:
        return self.kind == RunKind.SPEC

    @property
    def repairs(self) -> tuple[SessionView, ...]:
        return tuple(session for session in self.sessions if session.repair)

    def chart(self) -> list[dict[str, Any]]:
        """The timeline's bars, one per Session, oldest first."""
        return [session.bar() for session in self.sessions]


@dataclass(frozen=True)
class LogDownload:
    """A Session log to download: its file's name and its lines, each scrubbed as it is read;
    or, without ``lines``, why not (``status`` 404 or 503, ``problem`` saying it)."""

    name: str
    lines: Iterator[bytes] | None
    problem: str = ""
    status: int = 200


def run_page(
    store: Store,
    run_id: int,
    scrub: Scrub,
    *,
    web_root: str | None = None,
    now: datetime | None = None,
) -> RunPage:
    """The page of Run ``run_id`` as the store has it. ``web_root`` (``https://github.com``)
    makes the repository, issue and pull request links. A StoreError is the caller's."""
    now = now or datetime.now(UTC)
    if run_id > LARGEST_ID or store.get_run(run_id) is None:
        return RunPage(run_id=run_id, generated_at=now, found=False)
    view = reading.run_view(store, run_id, "")
    run, tree = view.run, view.tree
    total = view.usage.get(run.id)
    lease = view.lease
    held = lease is not None and lease.run_id == run.id and store.lease_held(lease)
    by_id = {session.id: session for session in view.sessions}
    sessions = tuple(
        _session_view(number, session, by_id, store.session_events(session.id), run, now, scrub)
        for number, session in enumerate(view.sessions, start=1)
    )
    return RunPage(
        run_id=run.id,
        generated_at=now,
        subject=scrub(run.subject),
        kind=run.kind,
        state=run.state,
        outcome=scrub(views.outcome(run)),
        head=run.head_sha or "-",
        fields=tuple(
            Field(f.label, scrub(f.value), f.href) for f in _fields(run, total, tree, web_root, now)
        ),
        lease=scrub(_lease_line(lease)) if held and lease is not None else None,
        spec_run=_link(tree.spec_run, scrub) if tree.spec_run is not None else None,
        tickets=_tickets(run, tree, scrub),
        sessions=sessions,
        earlier=tuple(_link(earlier, scrub) for earlier in view.earlier_runs),
        activity=tuple(
            scrub(f"{views.stamp(line.created_at)} {line.kind}: {line.message}")
            for line in view.activity
        ),
    )


def session_log(
    store: Store, run_id: int, session_id: int, scrub: Scrub, logs: Path | None
) -> LogDownload:
    """Session ``session_id`` of Run ``run_id``'s log, from the path the store recorded for
    it (a request names only the two ids); a session of another Run is none of this one's.
    Only a file inside ``logs`` (this home's Session logs; None: none) is served: whoever may
    write the database must not make the page read any other file of this host."""
    sessions = store.run_sessions(run_id) if run_id <= LARGEST_ID else []
    session = next((s for s in sessions if s.id == session_id), None)
    if session is None:
        return LogDownload(
            name="",
            lines=None,
            problem=f"Run {run_id} has no session {session_id}: its page lists its sessions",
            status=404,
        )
    path = Path(session.log_path)
    name = download_name(path.name)
    real = Path(os.path.realpath(path))
    if logs is None or not real.is_relative_to(os.path.realpath(logs)):
        return LogDownload(
            name=name,
            lines=None,
            problem=(
                f"the Session log of Run {run_id}'s {session.kind} session ({path.name}) is not "
                "in this daemon's home: a Session log stays in the THIRDSHIFT_HOME of the "
                "machine that ran the Run; the page's replay is from the database"
            ),
            status=404,
        )
    try:
        log = real.open("rb")  # the path checked, not one a link could change meanwhile
    except OSError as error:
        return LogDownload(
            name=name,
            lines=None,
            problem=(
                f"the Session log of Run {run_id}'s {session.kind} session ({path.name}) is not "
                f"on this machine ({error.strerror}): a Session log stays in the THIRDSHIFT_HOME "
                "of the machine that ran the Run; the page's replay is from the database"
            ),
            status=404,
        )
    return LogDownload(name=name, lines=_scrubbed_lines(log, scrub))


def download_name(name: str) -> str:
    """A file name fit for a ``Content-Disposition`` header: word characters, dots and
    dashes, nothing else (``session.jsonl`` when that leaves nothing)."""
    kept = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return kept or "session.jsonl"


def replay_lines(events: Sequence[SessionEvent], scrub: Scrub) -> tuple[ReplayLine, ...]:
    """A session's events as the replay reads them, in order; past ``REPLAY_EVENTS``, the
    first and last halves with a ``gap`` line saying how many were left out between."""
    half = REPLAY_EVENTS // 2
    if len(events) <= REPLAY_EVENTS:
        return tuple(_replay_line(event, scrub) for event in events)
    left_out = len(events) - 2 * half
    gap = ReplayLine(
        seq=events[half].seq,
        kind="gap",
        text=f"… {left_out} events left out here: the Session log holds every line",
    )
    return (
        *(_replay_line(event, scrub) for event in events[:half]),
        gap,
        *(_replay_line(event, scrub) for event in events[-half:]),
    )


def _replay_line(event: SessionEvent, scrub: Scrub) -> ReplayLine:
    text = scrub(condensed(event).strip())
    target = event.target.strip() if event.target else ""
    shown = " ".join(event.summary.split())
    detail = scrub(target) if target and " ".join(target.split()) not in shown else None
    failed = event.kind == "error" or (
        event.kind == "tool_result" and event.exit_status not in (None, 0)
    )
    return ReplayLine(
        seq=event.seq,
        kind=event.kind,
        text=text,
        detail=detail if event.kind == "tool_call" else None,
        failed=failed,
    )


def _scrubbed_lines(log: Any, scrub: Scrub) -> Iterator[bytes]:
    """The file's lines, each scrubbed (the one-scrubber rule holds for a download too), the
    file closed at the end."""
    with log:
        for line in log:
            yield scrub(line.decode("utf-8", "replace")).encode()


def _seconds(start: datetime, moment: datetime) -> float:
    return round(max((_aware(moment) - _aware(start)).total_seconds(), 0.0), 3)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _session_view(
    number: int,
    session: SessionRecord,
    by_id: dict[int, SessionRecord],
    events: Sequence[SessionEvent],
    run: Run,
    now: datetime,
    scrub: Scrub,
) -> SessionView:
    usage = session.usage
    tokens = (
        None
        if usage.input_tokens is None and usage.output_tokens is None
        else (usage.input_tokens or 0) + (usage.output_tokens or 0)
    )
    prompt = session.prompt.splitlines()
    # A session of a Run that ended without ending it (a crash) ends with its Run.
    end = session.ended_at or run.ended_at
    running = end is None
    return SessionView(
        session_id=session.id,
        number=number,
        name=scrub(views.session_name(session, by_id)),
        kind=scrub(session.kind),
        harness=scrub(session.harness),
        model=scrub(model) if (model := usage.model or session.model) else None,
        state=session.state,
        summary=scrub(history_line(session).removeprefix(f"{session.kind} · ")),
        started=views.stamp(session.started_at),
        start_seconds=_seconds(run.started_at, session.started_at),
        end_seconds=_seconds(run.started_at, end or now),
        running=running,
        tokens=tokens,
        cost_usd=usage.cost_usd,
        error=scrub(session.error) if session.error else None,
        killed_work=scrub(session.killed_work) if session.killed_work else None,
        final_message=scrub(session.final_message) if session.final_message else None,
        prompt=tuple(scrub(line) for line in prompt[:PROMPT_LINES]),
        prompt_lines=len(prompt),
        events=len(events),
        lines=replay_lines(events, scrub),
        log_name=scrub(Path(session.log_path).name),
    )


def _web(web_root: str | None, path: str) -> str | None:
    return None if web_root is None else f"{web_root.rstrip('/')}/{path}"


def _fields(
    run: Run,
    total: UsageTotal | None,
    tree: views.SpecTree,
    web_root: str | None,
    now: datetime,
) -> list[Field]:
    """The Run's record, line by line, as ``thirdshift show`` words it."""
    repository = run.repository.full_name
    fields = [
        Field("Kind", views.kind(run)),
        Field("State", run.state),
        Field("Repository", repository, _web(web_root, repository)),
    ]
    if run.issue_number is None:
        fields.append(Field("Issue", "none (an Architect run)"))
    else:
        number = run.issue_number
        fields.append(Field("Issue", run.subject, _web(web_root, f"{repository}/issues/{number}")))
    if run.pull_request_number is not None:
        pull = run.pull_request_number
        fields.append(
            Field("Pull request", f"#{pull}", _web(web_root, f"{repository}/pull/{pull}"))
        )
    else:
        fields.append(Field("Pull request", "none"))
    fields += [
        Field("Harness", views.harnesses(run, total)),
        Field("Model", run.model or "the Harness's default (each session names it below)"),
        Field("Base branch", run.base_branch or "-"),
        Field(
            "Spec branch" if run.kind == RunKind.SPEC else "Issue branch", run.issue_branch or "-"
        ),
        Field("Head", run.head_sha or "-"),
    ]
    if run.cause:
        fields.append(Field("Cause", run.cause))
    if run.killed_work:
        fields.append(Field("Killed work", run.killed_work))
    if run.published:
        fields.append(Field("Published", ", ".join(f"#{n}" for n in run.published)))
    if run.landed_sha:
        fields.append(Field("Landed", f"{run.landed_sha[:12]} at {views.stamp(run.landed_at)}"))
    ended = views.stamp(run.ended_at) if run.ended_at is not None else "still running"
    took = views.duration(run.started_at, run.ended_at or now)
    fields += [
        Field("Started", views.stamp(run.started_at)),
        Field("Ended", f"{ended} ({took})"),
        Field("Cost", _cost(total)),
    ]
    if run.kind == RunKind.SPEC and tree.cost_usd is not None:
        fields.append(
            Field("Cost of the whole Spec run", f"${tree.cost_usd:.4f} (its Tickets too)")
        )
    return fields


def _cost(total: UsageTotal | None) -> str:
    if total is None:
        return "- (no sessions)"
    return (
        f"{views.cost(total)}, {total.sessions} session(s), {total.input_tokens} tokens in "
        f"({total.cached_input_tokens} cached), {total.output_tokens} out, {total.turns} turns"
    )


def _lease_line(lease: Lease) -> str:
    return (
        f"held by {lease.owner}, fencing token {lease.fencing_token}, until "
        f"{views.stamp(lease.expires_at)}"
    )


def _link(run: Run, scrub: Scrub) -> RunLink:
    return RunLink(
        run_id=run.id,
        subject=scrub(run.subject),
        state=run.state,
        note=scrub(views.cut(views.ending(run), NOTE_WIDTH)),
    )


def _tickets(run: Run, tree: views.SpecTree, scrub: Scrub) -> tuple[TicketNode, ...]:
    if run.kind != RunKind.SPEC:
        return ()
    nodes = []
    for number in views.ticket_numbers(tree):
        status, runs = views.ticket_status(run, number, tree)
        landed = tree.landed.get(number)
        nodes.append(
            TicketNode(
                number=number,
                status=scrub(status),
                landed_by=_link(landed, scrub) if landed is not None else None,
                runs=tuple(_link(ticket, scrub) for ticket in runs),
            )
        )
    return tuple(nodes)
