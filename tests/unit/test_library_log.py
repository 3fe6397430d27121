"""PyGithub's own log lines reach thirdshift's progress lines, scrubbed, and never stderr
(issue 32): ``route_library_log`` takes the ``github`` logger over for the process."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from thirdshift.github import route_library_log
from thirdshift.github.library_log import LOGGERS
from thirdshift.scrub import Scrubber


@pytest.fixture
def restored() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in LOGGERS]
    kept = [(list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, kept, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def test_a_redirection_line_becomes_a_scrubbed_progress_line_and_nothing_reaches_stderr(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "ghp_" + "a1B2" * 9
    scrub = Scrubber([secret])
    lines: list[str] = []
    route_library_log(lambda line: lines.append(scrub(line)))

    logging.getLogger("github.Requester").info(
        "Following Github server redirection from /repos/acme/old?t=%s to /repositories/7", secret
    )
    logging.getLogger("github.Requester").debug("a debug line is not said")

    assert lines == [
        "GitHub: Following Github server redirection from /repos/acme/old?t=[REDACTED] to "
        "/repositories/7"
    ]
    assert capsys.readouterr().err == ""


def test_a_daemons_route_stays_when_one_of_its_runs_asks_and_a_daemon_replaces_any(
    restored: None,
) -> None:
    daemon: list[str] = []
    run: list[str] = []
    route_library_log(daemon.append, replace=True)
    route_library_log(run.append)

    logging.getLogger("github").warning("one line")

    assert (daemon, run) == (["GitHub: one line"], [])
    route_library_log(run.append, replace=True)
    logging.getLogger("github").warning("two")
    assert (daemon, run) == (["GitHub: one line"], ["GitHub: two"])


def test_a_poll_waiting_behind_another_is_not_said_and_a_scheduler_error_is_a_progress_line(
    restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []
    route_library_log(lines.append, replace=True)

    scheduler = logging.getLogger("apscheduler.scheduler")
    scheduler.warning("Execution of job ... skipped: maximum number of running instances reached")
    scheduler.error("Job ... raised an exception")

    assert lines == ["scheduler: Job ... raised an exception"]
    assert capsys.readouterr().err == ""
