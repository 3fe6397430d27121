"""What a running daemon is doing, published for ``thirdshift status``.

The daemon writes its state to ``$THIRDSHIFT_HOME/daemons/<daemon name>.json`` every few
seconds (and once more when it stops): the repositories it watches with their last and next
poll, the Runs it executes, what waits in its queue, the Harness pauses and the GitHub rate-limit
budget left. These live in the daemon's memory, not in the database; Leases, Runs and
pass-overs are in the database, and ``status`` reads those there. A file of a daemon that has
not written for ``STALE_SECONDS`` is shown as not running.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STALE_SECONDS = 60.0
"""A daemon writes every few seconds; one silent this long has stopped or is stuck."""
STATE_VERSION = 1
"""The ``version`` of the ``daemon_state`` shape (docs/json.md): raised on a breaking change."""


@dataclass(frozen=True)
class PollState:
    repository: str
    last_poll_at: datetime | None
    last_poll_error: str | None
    next_poll_at: datetime | None
    queued: tuple[int, ...]
    """Issues found Ready and waiting for a free slot (within max_runs)."""
    next_architect_at: datetime | None = None
    """When its ``architect_schedule`` next asks for an Architect run (None: it has none)."""


@dataclass(frozen=True)
class RunningState:
    repository: str
    issue_number: int | None  # None: an Architect run
    run_id: int | None
    started_at: datetime
    rescue_of: int | None = None


@dataclass(frozen=True)
class PauseState:
    harness: str
    until: datetime
    condition: str


@dataclass(frozen=True)
class DaemonProcess:
    """The daemon that writes a state: its name, its process and when it started."""

    name: str
    pid: int
    started_at: datetime


@dataclass(frozen=True)
class MissingHarness:
    """A Harness whose CLI a daemon no longer finds: why, with the fix."""

    harness: str
    problem: str


@dataclass(frozen=True)
class HarnessHolds:
    """What holds a daemon's Runs back, by Harness: its provider's outage, or its CLI gone (no
    Run starts until it is back)."""

    pauses: tuple[PauseState, ...] = ()
    missing: tuple[MissingHarness, ...] = ()


@dataclass(frozen=True)
class DaemonState:
    daemon: DaemonProcess
    updated_at: datetime
    stopping: bool
    """Told to stop: it takes no new work and is saving its Runs."""
    polls: tuple[PollState, ...]
    running: tuple[RunningState, ...]
    holds: HarnessHolds
    rate_limit_remaining: int | None
    stopped: bool = False
    """It has exited; this is the last state it wrote."""


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def state_json(state: DaemonState) -> dict[str, Any]:
    """A daemon's state as its file holds it and ``status --json`` and the status page show it:
    the ``daemon_state`` shape of docs/json.md."""
    return {
        "type": "daemon_state",
        "version": STATE_VERSION,
        "daemon": state.daemon.name,
        "pid": state.daemon.pid,
        "started_at": _when(state.daemon.started_at),
        "updated_at": _when(state.updated_at),
        "stopping": state.stopping,
        "stopped": state.stopped,
        "repositories": [
            {
                "repository": poll.repository,
                "last_poll_at": _when(poll.last_poll_at),
                "last_poll_error": poll.last_poll_error,
                "next_poll_at": _when(poll.next_poll_at),
                "queued": list(poll.queued),
                "next_architect_at": _when(poll.next_architect_at),
            }
            for poll in state.polls
        ],
        "running": [
            {
                "repository": run.repository,
                # 0 for an Architect run, as documented: it has no issue.
                "issue_number": run.issue_number or 0,
                "run_id": run.run_id,
                "started_at": _when(run.started_at),
                "rescue_of": run.rescue_of,
            }
            for run in state.running
        ],
        "pauses": [
            {"harness": pause.harness, "until": _when(pause.until), "condition": pause.condition}
            for pause in state.holds.pauses
        ],
        "rate_limit_remaining": state.rate_limit_remaining,
        "missing_harnesses": [
            {"harness": gone.harness, "problem": gone.problem} for gone in state.holds.missing
        ],
    }


def write_state(directory: Path, state: DaemonState) -> None:
    """Replace the daemon's state file in one step, so a reader never sees half of it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = directory / f"{_file_name(state.daemon.name)}.json"
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".state-", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(state_json(state), stream, indent=2)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_states(directory: Path) -> list[dict[str, Any]]:
    """Every daemon state file in ``directory``, newest first; unreadable ones are left out.

    A state file being written is ``.state-*.partial`` until it replaces its target; one an
    older version was writing (``.state-*.json``, left by a kill) is not a daemon either."""
    states: list[dict[str, Any]] = []
    found = sorted(directory.glob("*.json")) if directory.is_dir() else []
    for path in (path for path in found if not path.name.startswith(".state-")):
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict) and _well_formed(loaded):
            states.append(loaded)
    return sorted(states, key=lambda state: str(state["updated_at"]), reverse=True)


def _well_formed(state: dict[str, Any]) -> bool:
    """Whether ``state`` has the shape ``state_json`` writes (a file cut short, edited by hand
    or written by another version is left out rather than breaking ``status``)."""
    if not isinstance(state.get("daemon"), str) or not isinstance(state.get("pid"), int):
        return False
    if not all(_aware(state.get(key)) for key in ("started_at", "updated_at")):
        return False
    polls, running, pauses = state.get("repositories"), state.get("running"), state.get("pauses")
    if not isinstance(polls, list) or not isinstance(running, list):
        return False
    if not isinstance(pauses, list):
        return False
    missing = state.get("missing_harnesses", [])  # written since issue 35
    if not isinstance(missing, list) or not all(
        isinstance(gone, dict)
        and isinstance(gone.get("harness"), str)
        and isinstance(gone.get("problem"), str)
        for gone in missing
    ):
        return False
    return (
        all(_poll_well_formed(poll) for poll in polls)
        and all(
            isinstance(run, dict)
            and isinstance(run.get("repository"), str)
            and isinstance(run.get("issue_number"), int)
            and _aware(run.get("started_at"))
            for run in running
        )
        and all(
            isinstance(pause, dict)
            and isinstance(pause.get("harness"), str)
            and _aware(pause.get("until"))
            for pause in pauses
        )
    )


def _poll_well_formed(poll: Any) -> bool:
    if not isinstance(poll, dict) or not isinstance(poll.get("repository"), str):
        return False
    return all(poll.get(key) is None or _aware(poll.get(key)) for key in _POLL_TIMES)


_POLL_TIMES = ("last_poll_at", "next_poll_at", "next_architect_at")


def _aware(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def is_live(state: dict[str, Any], now: datetime) -> bool:
    """Whether the daemon that wrote ``state`` is still writing: it wrote lately, did not say
    it stopped, and its process is alive (a daemon killed with -9 writes no last word)."""
    try:
        updated = datetime.fromisoformat(str(state["updated_at"]))
        pid = int(state["pid"])
    except (KeyError, TypeError, ValueError):
        return False
    fresh = (now - updated).total_seconds() < STALE_SECONDS
    return fresh and not state.get("stopped", False) and _alive(pid)


def _alive(pid: int) -> bool:
    # The state file is in this home, so on this host: the pid is one of this host's.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _file_name(daemon: str) -> str:
    # A daemon's name is the host's by default; keep the file name to safe characters.
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in daemon) or "daemon"
