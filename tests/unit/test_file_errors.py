"""File errors are session errors, not crashes (adr/0041): a Session log or an event writer
that meets a full disk halts its session with a cause naming the disk and the fix; a session
does not start on a disk below ``min_free_disk_mb``. The full disk is real: ``/dev/full``
refuses every write with ENOSPC."""

from __future__ import annotations

import errno
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.unit.test_live_session import ScriptedReader
from thirdshift.clock import SystemClock
from thirdshift.harnesses import AgentSandbox, SealedPaths, harness_named
from thirdshift.home import disk_error, disk_problem, disk_short
from thirdshift.records import SessionEvent, Watchdogs
from thirdshift.scrub import Scrubber
from thirdshift.sessions import SessionFailed
from thirdshift.sessions.cli_outside import CliOutside
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.event_writer import EventWriter
from thirdshift.sessions.ledger import NO_BUDGETS
from thirdshift.sessions.live_session import LiveSession, Meter, SessionLog
from thirdshift.sessions.sealed_space import SealedSpace
from thirdshift.store import Store

FULL = Path("/dev/full")
NO_SPACE = "No space left on device"


def _live(log: SessionLog, writer: EventWriter, progress: list[str]) -> LiveSession:
    meter = Meter(harness_named("claude"), None, lambda usage: usage, NO_BUDGETS, None)
    return LiveSession(
        "implement",
        log=log,
        reader=ScriptedReader(),
        writer=writer,
        meter=meter,
        worktree=Path("/srv/worktree"),
        scrub=Scrubber([]),
        progress=progress.append,
    )


def test_a_session_log_on_a_full_disk_keeps_the_error_and_raises_nothing() -> None:
    """The Session log's write to a full disk raises nothing into the supervisor's callback:
    the error is kept, later lines and the end notes are not tried, and closing is quiet."""
    with SessionLog.opened(FULL, 1 << 20, Scrubber([])) as log:
        assert log.keep("first line") is None
        assert log.failed is not None
        assert log.failed.errno == errno.ENOSPC
        first = log.failed
        assert log.keep("second line") is None
        log.end("the CLI's stderr")
        assert log.failed is first
    assert log.where == Path("/dev")


def test_a_full_disk_under_the_session_log_halts_the_session_with_its_cause() -> None:
    """The first line the Session log cannot keep halts the session (the supervisor stops the
    CLI with its stop signals) and says why once; the stream is still read meanwhile."""
    progress: list[str] = []
    events: list[SessionEvent] = []
    writer = EventWriter(events.extend, warn=progress.append)
    with SessionLog.opened(FULL, 1 << 20, Scrubber([])) as log:
        live = _live(log, writer, progress)
        live.on_line(b"event edited a file")
        live.on_line(b"event ran the tests")
    assert live.meter.halt.is_set()
    assert live.file_failure is not None
    assert live.file_failure.doing == "writing the Session log"
    assert live.file_failure.where == Path("/dev")
    assert (
        progress.count(
            f"implement: writing the Session log failed ({NO_SPACE}); stopping the session"
        )
        == 1
    )
    assert writer.close(5.0) == 0
    assert [e.summary for e in events] == ["edited a file", "ran the tests"]


def test_an_event_writer_whose_file_fails_stops_at_once_and_halts_the_session(
    tmp_path: Path,
) -> None:
    """An event write failing with a disk error is not tried again (a store retry is for a
    store that is away, not for a full disk): the writer keeps the error, its end is prompt,
    and the session is halted on the next line."""
    calls: list[int] = []

    def write(batch: Sequence[SessionEvent]) -> None:
        calls.append(len(batch))
        with FULL.open("ab") as events_file:
            events_file.write(b"x" * 8192)
            events_file.flush()

    progress: list[str] = []
    writer = EventWriter(write, warn=progress.append, sleep=lambda _seconds: None)
    with SessionLog.opened(tmp_path / "session.jsonl", 1 << 20, Scrubber([])) as log:
        live = _live(log, writer, progress)
        live.on_line(b"event one")
        pause = threading.Event()
        for _ in range(100):  # the writer's thread meets the error on its own time
            if writer.failed is not None:
                break
            pause.wait(0.05)
        live.on_line(b"event two")
    assert writer.failed is not None
    assert writer.failed.errno == errno.ENOSPC
    assert calls == [1]
    assert writer.close(5.0) == 0
    assert live.meter.halt.is_set()
    assert live.file_failure is not None
    assert live.file_failure.doing == "writing the Session events"
    assert (
        "implement: writing the Session events failed (No space left on device); stopping "
        "the session" in progress
    )


def test_a_disk_error_is_found_behind_the_errors_raised_from_it() -> None:
    """A full disk (or quota, I/O error, read-only disk) behind an error, however deep, is
    found; any other error is not taken for one."""
    full = OSError(errno.ENOSPC, NO_SPACE, "/home/me/.thirdshift/logs/run.jsonl")
    outer = RuntimeError("while writing")
    outer.__context__ = ValueError("on the way")
    outer.__context__.__cause__ = full
    assert disk_error(outer) is full
    assert disk_error(OSError(errno.ENOENT, "No such file or directory")) is None
    assert disk_error(ValueError("no disk here")) is None
    assert disk_error(OSError(errno.EROFS, "Read-only file system")) is not None


def test_a_disk_problem_names_the_disk_what_failed_and_the_fix() -> None:
    """The cause of a disk error says which disk, what failed, the system's reason and what
    to do, and never calls it a bug."""
    full = OSError(errno.ENOSPC, NO_SPACE, "/home/me/.thirdshift/logs/run.jsonl")
    assert disk_problem(full, "writing the Session log") == (
        "the disk of /home/me/.thirdshift/logs is full: writing the Session log failed "
        f"({NO_SPACE}); free space in /home/me/.thirdshift/logs and run again"
    )
    broken = OSError(errno.EIO, "Input/output error")
    assert disk_problem(broken, "committing") == (
        "the disk of thirdshift's home failed: committing failed (Input/output error); check "
        "the disk (the kernel's log says more) and run again"
    )
    assert "read-only" in disk_problem(OSError(errno.EROFS, "Read-only file system"), "x")


def test_a_disk_short_of_the_minimum_is_named_with_its_free_space_and_the_setting(
    tmp_path: Path,
) -> None:
    """Below ``min_free_disk_mb`` the disk is short, in words naming the free space and the
    setting; at zero it never is."""
    short = disk_short(tmp_path, 1 << 40)
    assert short is not None
    assert short.startswith("only ")
    assert f"MiB free on the disk of {tmp_path}" in short
    assert "min_free_disk_mb" in short
    assert disk_short(tmp_path, 0) is None


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'thirdshift.db'}")


def test_a_session_does_not_start_on_a_disk_below_min_free_disk_mb(
    tmp_path: Path, store: Store
) -> None:
    """Before each session the disk of its Worktree and its logs is checked: short of
    ``min_free_disk_mb``, no CLI starts, no session is recorded, and the session fails with
    the free space and the fix (its Session log says so too)."""
    repository = store.ensure_repository("acme", "widgets")
    run = store.start_run(repository, 42, harness="claude")
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    progress: list[str] = []
    outside = CliOutside(
        # A program that does not exist: starting it would be another failure.
        harness_named("claude", executable=str(tmp_path / "no-such-cli")),
        run_id=run.id,
        parts=SessionParts(
            store=store,
            environ={"PATH": "/usr/bin:/bin"},
            scrub=Scrubber([]),
            clock=SystemClock(),
            progress=progress.append,
            interrupt=threading.Event(),
        ),
        bounds=SessionBounds(
            watchdogs=Watchdogs(idle_seconds=60, wall_seconds=60, post_result_seconds=5),
            grace_seconds=1,
            min_free_disk_mb=1 << 40,
        ),
        space=SealedSpace(
            AgentSandbox(sealed=False),
            SealedPaths(
                worktree=worktree,
                clone=worktree,
                agent_home=tmp_path / "agent-home",
                hidden=(),
                readable=(),
            ),
        ),
    )
    log_path = tmp_path / "logs" / "implement.jsonl"
    with pytest.raises(SessionFailed) as failed:
        outside.run_session("implement", None, "Fix it.", log_path)
    cause = failed.value.cause
    assert cause.startswith("implement session not started: only ")
    assert "free some space" in cause
    assert "min_free_disk_mb" in cause
    assert store.run_sessions(run.id) == []
    assert cause in log_path.read_text()
    assert progress == [cause]


@pytest.mark.parametrize(
    ("number", "whose"),
    [(errno.EMFILE, "thirdshift's process"), (errno.ENFILE, "the system")],
)
def test_running_out_of_descriptors_is_the_machine_s_problem_with_the_limit_to_raise(
    number: int, whose: str
) -> None:
    """No descriptor left is a limit of the machine, found however deep it was raised, and named
    with the limit to raise; never "a bug in thirdshift"."""
    try:
        try:
            raise OSError(number, "Too many open files")
        except OSError as inner:
            raise RuntimeError("opening the clone") from inner
    except RuntimeError as error:
        found = disk_error(error)
    assert found is not None
    said = disk_problem(found, "opening a socket")
    assert said.startswith(f"{whose} has no file descriptor left: opening a socket failed")
    assert "LimitNOFILE=" in said
    assert "bug" not in said
