"""What every command shares: its error exit, its stdout and terminal lines, the settings'
database, and Ctrl-C, SIGTERM and SIGHUP turned into an interrupt the work can see."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from thirdshift.console import LiveProgress, Progress, printable
from thirdshift.errors import ThirdshiftError

if TYPE_CHECKING:
    pass

# How often a wait of the main thread for an interrupt looks again, so that nothing depends on
# the signal waking that thread itself.
POLL_SECONDS = 0.5

# The signals that stop a command; SIGHUP too: a closed terminal must save the work like Ctrl-C.
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def fail(error: ThirdshiftError) -> NoReturn:
    click.echo(f"thirdshift: {error}", err=True)
    sys.exit(error.exit_code)


def show(text: str) -> None:
    """A line for a person's terminal: what an agent printed (a log line, a prompt) may hold
    control characters, which are shown, never acted on."""
    with suppress(OSError, ValueError):
        click.echo(printable(text))


def emit(url: str) -> None:
    """A URL on stdout; a closed terminal (SIGHUP) must not stop the Run saving its work."""
    with suppress(OSError, ValueError):
        click.echo(url)


def command_line(line: str) -> None:
    """A workflow command for the Actions runner, on stderr beside the progress lines."""
    with suppress(OSError, ValueError):
        click.echo(line, err=True)


def guarded(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except ThirdshiftError as error:
        fail(error)


@contextmanager
def reported() -> Iterator[None]:
    """A usage error from below ends the command as click's usage error (exit 2); any other
    ThirdshiftError with its one line and its exit status."""
    from thirdshift.errors import UsageError

    try:
        yield
    except UsageError as error:
        raise click.UsageError(str(error)) from None
    except ThirdshiftError as error:
        fail(error)


def check_repositories(names: Iterable[str]) -> None:
    """Each ``--repo`` given is an OWNER/NAME, or the command ends as a usage error (exit 2)."""
    from thirdshift.settings import check_repository_name

    for name in names:
        try:
            check_repository_name(name)
        except ValueError as error:
            raise click.UsageError(f"--repo: {error}") from None


def check_owners(names: Iterable[str]) -> None:
    """Each ``--owner`` given is a GitHub user or organisation name, or the command ends as a
    usage error (exit 2)."""
    from thirdshift.settings import check_owner_name

    for name in names:
        try:
            check_owner_name(name)
        except ValueError as error:
            raise click.UsageError(f"--owner: {error}") from None


def wait_for_interrupt(
    progress: Callable[[str], None], what: str, interrupt: threading.Event
) -> None:
    """Block until Ctrl-C or SIGTERM sets ``interrupt``; the caller then stops its servers."""
    progress(f"{what}; press Ctrl-C to stop")
    # Short waits, not one long one: should the interrupt ever be set by a handler that runs
    # only when this thread wakes, it still ends the wait within POLL_SECONDS.
    while not interrupt.wait(POLL_SECONDS):
        pass
    progress("interrupted, stopping")


@contextmanager
def closing(progress: Progress | LiveProgress) -> Iterator[None]:
    """Take the live status line away when the command ends, however it ends."""
    try:
        yield
    finally:
        if isinstance(progress, LiveProgress):
            progress.close()


@contextmanager
def signals_set(
    interrupt: threading.Event,
    progress: Callable[[str], None],
    *,
    quiet: bool = False,
    until_exit: bool = False,
    what: str = "the work will be saved",
) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP set ``interrupt`` instead of killing the process: a Run stops its
    session and ends as a Failed run that saves its work; a server stops cleanly. A second
    signal changes nothing: saving must finish. Both handlers are installed explicitly, since a
    process started in the background inherits SIGINT ignored.

    The Python handler does nothing itself. Setting an Event takes its lock, which the main
    thread may hold at that moment (inside its own ``interrupt.wait``): the handler, run by that
    same thread, would then wait for itself forever. And the handler runs only when the main
    thread next runs Python code, which a signal delivered to another thread does not make
    happen soon. Instead the C-level handler writes each signal to a wakeup socket, whichever
    thread it lands on, and a relay thread sets ``interrupt`` and says so."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    relay = threading.Thread(
        target=_relay,
        args=(reader, interrupt, progress, None if quiet else what),
        name="thirdshift-signals",
        daemon=True,
    )
    relay.start()
    # The wakeup socket first, the handlers after (and the other way round at the end): a
    # signal in between must never meet the do-nothing handler without the socket.
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    previous = {sig: signal.signal(sig, _noted) for sig in STOPS}
    try:
        yield
    finally:
        if until_exit:
            # A second signal arriving after the salvage must not turn the Run's exit status
            # into a death by signal: Python restores the default handlers as it shuts down, so
            # from here to the exit these signals stay blocked (and are then discarded).
            signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        else:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        signal.set_wakeup_fd(previous_fd)
        with suppress(OSError):
            writer.send(b"\0")  # no signal is numbered 0: it tells the relay to end
        relay.join(timeout=5)
        writer.close()
        reader.close()


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python handler: nothing to do, the wakeup socket has the signal already."""


def _relay(
    reader: socket.socket,
    interrupt: threading.Event,
    progress: Callable[[str], None],
    what: str | None,
) -> None:
    """Set ``interrupt`` for each stopping signal the wakeup socket reports, until told to end."""
    while True:
        try:
            received = reader.recv(64)
        except OSError:
            return
        for signum in received:
            if signum == 0:
                return
            if signum not in STOPS:
                continue
            if not interrupt.is_set() and what is not None:
                progress(f"{signal.Signals(signum).name}: stopping; {what}")
            interrupt.set()
        if not received:
            return
