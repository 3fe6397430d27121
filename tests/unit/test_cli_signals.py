"""Ctrl-C, SIGTERM and SIGHUP reach a command's interrupt whatever its main thread is doing and
whichever thread the signal lands on. Each case runs in a process of its own: signal handlers
belong to a process's main thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _start(body: str) -> subprocess.Popen[str]:
    script = textwrap.dedent(
        """
        import signal, sys, threading, time
        from thirdshift.cli.common import signals_set, wait_for_interrupt

        interrupt = threading.Event()

        def said(line):
            print(line, flush=True)
        """
    ) + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_signal_landing_on_another_thread_ends_a_long_wait_at_once() -> None:
    """The kernel may hand SIGTERM to any thread; the main thread, waiting long on the
    interrupt (as a Run's clock does), still wakes at once instead of when its wait times out."""
    child = _start(
        """
        def elsewhere():
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            time.sleep(60)

        with signals_set(interrupt, said):
            threading.Thread(target=elsewhere, daemon=True).start()
            started = time.monotonic()
            interrupt.wait(60)
            said(f"woke after {time.monotonic() - started:.1f}s")
        """
    )
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 0, stderr
    assert "SIGTERM: stopping; the work will be saved" in stdout
    woke = float(stdout.split("woke after ")[1].split("s")[0])
    assert woke < 10


def test_wait_for_interrupt_ends_on_a_signal_landing_on_another_thread() -> None:
    """A server waiting for Ctrl-C stops when the signal lands on one of its other threads."""
    child = _start(
        """
        def elsewhere():
            time.sleep(0.3)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            time.sleep(60)

        with signals_set(interrupt, said, quiet=True):
            threading.Thread(target=elsewhere, daemon=True).start()
            wait_for_interrupt(said, "serving", interrupt)
        """
    )
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 0, stderr
    assert stdout.splitlines() == ["serving; press Ctrl-C to stop", "interrupted, stopping"]


def test_signals_arriving_while_the_main_thread_waits_on_the_interrupt_never_hang_it() -> None:
    """A handler that set the interrupt itself would take the lock the main thread holds inside
    ``interrupt.wait`` and wait for itself forever; a burst of signals landing mid-wait must
    leave the command free to finish."""
    child = _start(
        """
        with signals_set(interrupt, said, quiet=True, until_exit=True):
            said("ready")
            end = time.monotonic() + 2
            while time.monotonic() < end:
                interrupt.wait(0)
        said("finished")
        """
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    end = time.monotonic() + 1.5
    while time.monotonic() < end and child.poll() is None:
        child.send_signal(signal.SIGTERM)
        time.sleep(0.001)
    stdout, stderr = child.communicate(timeout=30)
    assert child.returncode == 0, stderr
    assert stdout == "finished\n"
