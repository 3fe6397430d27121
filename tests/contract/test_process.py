"""Supervising a process, with real subprocesses and real signals."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from thirdshift.harnesses.process import (
    LINE_CAP_BYTES,
    STDERR_TAIL_BYTES,
    CutLine,
    ProcessEnding,
    ProcessStartError,
    run_supervised,
)
from thirdshift.harnesses.process_tree import descendants, stop_process_tree, working_in
from thirdshift.records import Watchdogs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "processes"
PATIENT = Watchdogs(idle_seconds=10, wall_seconds=20, post_result_seconds=10)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _run(
    argv: Sequence[str],
    cwd: Path,
    *,
    watchdogs: Watchdogs = PATIENT,
    stop_signals: Sequence[signal.Signals] = (signal.SIGTERM,),
    grace_seconds: float = 0.3,
    env: dict[str, str] | None = None,
    interrupt_on: bytes | None = None,
    result_on: bytes | None = None,
) -> tuple[ProcessEnding, list[bytes]]:
    """Run ``argv`` supervised; set the interrupt when the line ``interrupt_on`` arrives, and
    call the result seen once the line ``result_on`` has."""
    lines: list[bytes] = []
    interrupt = threading.Event()

    def on_line(line: bytes) -> None:
        lines.append(line)
        if line == interrupt_on:
            interrupt.set()

    def result_seen() -> bool:
        return result_on is not None and result_on in lines

    ending = run_supervised(
        argv,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], **(env or {})},
        on_line=on_line,
        result_seen=result_seen,
        watchdogs=watchdogs,
        stop_signals=stop_signals,
        grace_seconds=grace_seconds,
        interrupt=interrupt,
        tick_seconds=0.05,
    )
    return ending, lines


def _running(pid: int) -> bool:
    """True while ``pid`` runs. A zombie does not: it is dead, waiting for init to reap it."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _pids(path: Path) -> list[int]:
    return [int(word) for word in path.read_text().split()]


def _eventually(condition: Callable[[], bool], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_lines_reach_on_line_in_order_whole_and_unterminated(tmp_path: Path) -> None:
    """Every stdout line arrives in order without its newline: one exactly at the cap whole,
    an empty one, and a last one with no newline."""
    code = (
        "import sys; out = sys.stdout.buffer; out.write(b'first\\n'); "
        f"out.write(b'x' * {LINE_CAP_BYTES} + b'\\n'); out.write(b'\\n'); out.write(b'last')"
    )
    ending, lines = _run(_python(code), tmp_path)
    assert ending.exit_status == 0
    assert ending.stopped_by is None
    assert len(lines) == 4
    assert lines[0] == b"first"
    assert lines[1] == b"x" * LINE_CAP_BYTES
    assert lines[2:] == [b"", b"last"]


def _supervise(
    argv: Sequence[str],
    cwd: Path,
    *,
    line_cap_bytes: int,
    on_line: Callable[[bytes], None],
    on_cut: Callable[[CutLine], None],
) -> ProcessEnding:
    return run_supervised(
        argv,
        cwd=cwd,
        env={"PATH": os.environ["PATH"]},
        on_line=on_line,
        on_cut=on_cut,
        line_cap_bytes=line_cap_bytes,
        result_seen=lambda: False,
        watchdogs=PATIENT,
        stop_signals=(signal.SIGTERM,),
        grace_seconds=0.3,
        interrupt=threading.Event(),
        tick_seconds=0.05,
    )


def test_a_line_over_the_cap_is_cut_with_its_dropped_bytes_counted_and_reading_goes_on(
    tmp_path: Path,
) -> None:
    """A 300 MiB line with a 1 MiB cap reaches on_cut as its first MiB and the count of the
    rest, in its place among whole lines; a last line over the cap without a newline is cut
    too. The supervisor's memory (every Python allocation of this process, the pump's
    included) never grows by more than a few caps, whatever the line's length."""
    cap = 1024 * 1024
    big = 300 * cap
    code = (
        "import sys; out = sys.stdout.buffer; out.write(b'before\\n'); "
        f"block = b'y' * {cap}\n"
        f"for _ in range({big // cap}): out.write(block)\n"
        "out.write(b'\\nafter\\n'); out.write(b'z' * "
        f"{cap + 5})"
    )
    got: list[bytes | CutLine] = []
    tracemalloc.start()
    try:
        _supervise(
            _python(code), tmp_path, line_cap_bytes=cap, on_line=got.append, on_cut=got.append
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [
        b"before",
        CutLine(b"y" * cap, big - cap),
        b"after",
        CutLine(b"z" * cap, 5),
    ]
    assert peak < 8 * cap, f"peak {peak} bytes while reading a {big}-byte line"


def test_lines_the_caller_has_not_taken_are_held_up_to_a_bound(tmp_path: Path) -> None:
    """A CLI that writes 200 lines of a cap each to a caller slower than it waits for the
    caller: the lines read ahead never take more than a few caps of memory."""
    cap = 1024 * 1024
    code = f"import sys\nfor _ in range(200): sys.stdout.buffer.write(b'w' * {cap} + b'\\n')"
    count = [0]

    def slowly(line: bytes) -> None:
        assert len(line) == cap
        count[0] += 1
        time.sleep(0.02)

    tracemalloc.start()
    try:
        _supervise(_python(code), tmp_path, line_cap_bytes=cap, on_line=slowly, on_cut=print)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count[0] == 200
    # Two caps queued and one line over them, the line being read and its copy, the caller's
    # line: about seven caps, near nine when a busy machine lines them up; never 200.
    assert peak < 12 * cap, f"peak {peak} bytes for 200 lines of {cap} bytes"


def test_the_clis_own_processes_cannot_reopen_its_stdout_through_proc(tmp_path: Path) -> None:
    """A child of the CLI (as the agent's commands are) opening ``/proc/<cli>/fd/1`` to write
    a stream line of its own is refused, and nothing it meant to write arrives."""
    child = (
        "import os, sys\n"
        "try:\n"
        "    fd = os.open(f'/proc/{os.getppid()}/fd/1', os.O_WRONLY)\n"
        '    os.write(fd, b\'{"type": "result", "forged": true}\\n\')\n'
        "    print('opened', file=sys.stderr)\n"
        "except OSError as error:\n"
        "    print('refused', error.errno, file=sys.stderr)\n"
    )
    code = (
        "import subprocess, sys, time\n"
        f"done = subprocess.run([sys.executable, '-c', {child!r}], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.PIPE, check=False)\n"
        "print(done.stderr.decode().strip(), flush=True)\n"
    )
    ending, lines = _run(_python(code), tmp_path)
    assert ending.exit_status == 0
    assert lines == [f"refused {errno.ENXIO}".encode()]


def test_stdin_is_dev_null(tmp_path: Path) -> None:
    """A child that reads stdin sees its end at once."""
    code = "import sys; print(repr(sys.stdin.read()))"
    ending, lines = _run(_python(code), tmp_path)
    assert lines == [b"''"]
    assert ending.duration_seconds < 5


def test_only_the_given_environment_and_the_tree_marker_reach_the_child(tmp_path: Path) -> None:
    """The child's environment is the one given, plus the tree marker, and runs in ``cwd``."""
    _, lines = _run(["bash", "-c", "pwd; env"], tmp_path, env={"ONLY_THIS": "1"})
    assert lines[0] == str(tmp_path).encode()
    names = {line.partition(b"=")[0] for line in lines[1:]}
    # bash itself adds PWD, SHLVL and _
    assert names - {b"PWD", b"SHLVL", b"_"} == {b"ONLY_THIS", b"PATH", b"TS_SESSION_TREE"}


def test_exit_status_and_only_the_tail_of_stderr_are_kept(tmp_path: Path) -> None:
    """The exit status comes back, with the last 16 KiB of stderr, invalid bytes replaced."""
    code = (
        "import sys; err = sys.stderr.buffer; err.write(b'head' + b'a' * 100_000); "
        "err.write(b'\\xff THE END'); sys.exit(7)"
    )
    ending, _ = _run(_python(code), tmp_path)
    assert ending.exit_status == 7
    assert ending.stopped_by is None
    assert len(ending.stderr_tail) == STDERR_TAIL_BYTES
    assert ending.stderr_tail.endswith("\N{REPLACEMENT CHARACTER} THE END")
    assert "head" not in ending.stderr_tail


def test_idle_watchdog_stops_a_silent_process(tmp_path: Path) -> None:
    """No stdout line for idle_seconds stops the process, stopped by "idle"."""
    # The shell prints its line in milliseconds; a Python child under CI's load once took longer
    # than the idle time just to start, and was stopped before its first line.
    watchdogs = Watchdogs(idle_seconds=1.0, wall_seconds=20, post_result_seconds=20)
    ending, lines = _run(["sh", "-c", "echo hello; exec sleep 30"], tmp_path, watchdogs=watchdogs)
    assert lines == [b"hello"]
    assert ending.stopped_by == "idle"
    assert ending.exit_status == -signal.SIGTERM
    assert 1.0 <= ending.duration_seconds < 10


def test_wall_watchdog_stops_a_chatty_process(tmp_path: Path) -> None:
    """A process that keeps talking is still stopped at wall_seconds, stopped by "wall"."""
    watchdogs = Watchdogs(idle_seconds=5, wall_seconds=0.5, post_result_seconds=20)
    code = "import time\nwhile True: print('tick', flush=True); time.sleep(0.02)"
    ending, lines = _run(_python(code), tmp_path, watchdogs=watchdogs)
    assert ending.stopped_by == "wall"
    assert 0.5 <= ending.duration_seconds < 5
    assert len(lines) > 5


def test_post_result_watchdog_stops_a_process_lingering_after_its_result(
    tmp_path: Path,
) -> None:
    """post_result_seconds after result_seen() turns True, the process is stopped, stopped by
    "post-result", even while it keeps talking."""
    watchdogs = Watchdogs(idle_seconds=5, wall_seconds=20, post_result_seconds=0.4)
    code = (
        "import time\nfor _ in range(10): print('work', flush=True); time.sleep(0.02)\n"
        "print('result', flush=True)\nwhile True: print('tick', flush=True); time.sleep(0.02)"
    )
    started = time.monotonic()
    ending, lines = _run(_python(code), tmp_path, watchdogs=watchdogs, result_on=b"result")
    assert ending.stopped_by == "post-result"
    assert lines.index(b"result") == 10
    assert lines.count(b"tick") > 5
    assert time.monotonic() - started < 5


def test_interrupt_stops_the_process(tmp_path: Path) -> None:
    """Setting the interrupt event stops the process, stopped by "interrupt"."""
    code = "import time; print('ready', flush=True); time.sleep(30)"
    ending, _ = _run(_python(code), tmp_path, interrupt_on=b"ready")
    assert ending.stopped_by == "interrupt"
    assert ending.exit_status == -signal.SIGTERM
    assert ending.duration_seconds < 5


def test_stop_signals_are_sent_in_order_a_grace_apart(tmp_path: Path) -> None:
    """Each stop signal is sent once, in order, the grace period after the previous one; a
    process that exits on the second is not killed."""
    record = tmp_path / "signals"
    argv = [sys.executable, str(FIXTURES / "trap_two.py"), str(record), "trap"]
    ending, _ = _run(
        argv,
        tmp_path,
        stop_signals=(signal.SIGINT, signal.SIGTERM),
        grace_seconds=0.4,
        interrupt_on=b"ready",
    )
    received = [line.split() for line in record.read_text().splitlines()]
    assert [name for name, _ in received] == ["SIGINT", "SIGTERM"]
    assert float(received[1][1]) - float(received[0][1]) >= 0.35
    assert ending.exit_status == 3
    assert ending.stopped_by == "interrupt"


def test_a_process_ignoring_every_signal_is_killed_after_the_graces(tmp_path: Path) -> None:
    """A process deaf to every stop signal gets SIGKILL once all the graces have run out."""
    argv = [sys.executable, str(FIXTURES / "trap_two.py"), str(tmp_path / "signals"), "ignore"]
    ending, _ = _run(
        argv,
        tmp_path,
        stop_signals=(signal.SIGINT, signal.SIGTERM),
        grace_seconds=0.3,
        interrupt_on=b"ready",
    )
    assert ending.exit_status == -signal.SIGKILL
    assert 0.6 <= ending.duration_seconds < 5


def test_stopping_leaves_no_process_of_the_tree_running(tmp_path: Path) -> None:
    """After a stop, nothing the process started still runs: not a command in its own session,
    one in its own process group, a grandchild, nor an orphan of an exited parent."""
    pids = tmp_path / "pids"
    ending, lines = _run(
        ["bash", str(FIXTURES / "tree.sh")],
        tmp_path,
        env={"PIDS": str(pids)},
        interrupt_on=b"ready",
    )
    assert lines == [b"ready"]
    assert ending.stopped_by == "interrupt"
    assert len(_pids(pids)) == 6
    assert _eventually(lambda: not any(_running(pid) for pid in _pids(pids))), [
        pid for pid in _pids(pids) if _running(pid)
    ]


def test_a_normal_exit_kills_background_work_left_running(tmp_path: Path) -> None:
    """A process that exits leaving detached work running (holding its stdout) returns its exit
    status promptly, and the work is killed."""
    pids = tmp_path / "pids"
    ending, lines = _run(["bash", str(FIXTURES / "leftover.sh")], tmp_path, env={"PIDS": str(pids)})
    assert lines == [b"done"]
    assert ending.exit_status == 3
    assert ending.stopped_by is None
    assert ending.duration_seconds < 5
    [leftover] = _pids(pids)
    assert _eventually(lambda: not _running(leftover))


def test_descendants_and_stop_process_tree_reach_other_groups_and_sessions(
    tmp_path: Path,
) -> None:
    """descendants() follows parent links into other sessions and groups, and
    stop_process_tree() kills all of them."""
    pids = tmp_path / "pids"
    process = subprocess.Popen(
        ["bash", str(FIXTURES / "tree.sh")],
        env={"PATH": os.environ["PATH"], "PIDS": str(pids), "NO_ORPHAN": "1"},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"
        recorded = _pids(pids)
        assert set(recorded) - {process.pid} <= set(descendants(process.pid))
        stop_process_tree(process.pid, [signal.SIGTERM], 0.3)
        assert process.wait(timeout=5) == -signal.SIGTERM
        assert _eventually(lambda: not any(_running(pid) for pid in recorded))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_a_missing_program_raises_a_clear_error(tmp_path: Path) -> None:
    """A program not on PATH raises ProcessStartError naming it and the fix."""
    with pytest.raises(ProcessStartError, match=r"no-such-agent-cli.*put it on PATH"):
        _run(["no-such-agent-cli", "-p"], tmp_path)


def test_a_missing_working_directory_raises_a_clear_error(tmp_path: Path) -> None:
    """A working directory that does not exist raises ProcessStartError naming it."""
    with pytest.raises(ProcessStartError, match="working directory"):
        _run(["true"], tmp_path / "gone")


def test_a_failing_line_handler_still_kills_the_tree(tmp_path: Path) -> None:
    """When on_line raises, the error propagates and nothing of the tree keeps running."""
    pids = tmp_path / "pids"

    def on_line(line: bytes) -> None:
        raise RuntimeError(f"cannot handle {line!r}")

    with pytest.raises(RuntimeError, match="cannot handle b'ready'"):
        run_supervised(
            ["bash", str(FIXTURES / "tree.sh")],
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "PIDS": str(pids)},
            on_line=on_line,
            result_seen=lambda: False,
            watchdogs=PATIENT,
            stop_signals=(signal.SIGTERM,),
            grace_seconds=0.3,
            interrupt=threading.Event(),
        )
    assert _eventually(lambda: not any(_running(pid) for pid in _pids(pids)))


def test_working_in_finds_a_process_whose_directory_is_inside_the_worktree(
    tmp_path: Path,
) -> None:
    """A process working in (a directory below) the path is found; one elsewhere is not."""
    inside = tmp_path / "worktree" / "src"
    inside.mkdir(parents=True)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    there = subprocess.Popen(slow, cwd=inside)
    away = subprocess.Popen(slow, cwd=elsewhere)
    try:
        found = working_in(tmp_path / "worktree")
        assert there.pid in found
        assert away.pid not in found
    finally:
        for process in (there, away):
            process.kill()
            process.wait()
    assert there.pid not in working_in(tmp_path / "worktree")


def test_a_cli_that_closes_its_output_and_runs_on_is_watched_without_spinning(
    tmp_path: Path,
) -> None:
    """Once stdout has ended nothing more comes, but the supervisor still waits its ticks out
    (it once looped at full speed until the process exited: a core per hung CLI)."""
    started = time.process_time()
    ending, lines = _run(["sh", "-c", "echo hi; exec >&- 2>&-; sleep 2"], tmp_path)
    assert ending.exit_status == 0
    assert lines == [b"hi"]
    # Far below the two seconds a spinning watcher burns (the process's own CPU time, not
    # the wall clock: the machine's load does not change it).
    assert time.process_time() - started < 0.5
