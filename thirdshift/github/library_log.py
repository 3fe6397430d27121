"""The libraries' own log lines as thirdshift's progress lines: PyGithub's (``Following Github
server redirection from ... to ...``, at INFO) and the scheduler's errors (APScheduler's; its
warnings say only that a poll waits behind another, which the pacing of a busy daemon makes
routine, so they are not said). Through the process's scrubber, never raw to stderr and never
to the root logger another library may have set up."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

LOGGERS = {"github": (logging.INFO, "GitHub"), "apscheduler": (logging.ERROR, "scheduler")}
"""Each library's logger: the least level of its lines that are said, and how they are named."""


class _ToProgress(logging.Handler):
    def __init__(self, progress: Callable[[str], None], prefix: str) -> None:
        super().__init__(logging.NOTSET)
        self.progress = progress
        self.prefix = prefix

    def emit(self, record: logging.LogRecord) -> None:
        # A log line must never fail the request it describes; and logging's own error report
        # (handleError) would print the record's raw arguments, a URL with a token, to stderr.
        with contextlib.suppress(Exception):
            self.progress(f"{self.prefix}: {record.getMessage()}")


def route_library_log(progress: Callable[[str], None], *, replace: bool = False) -> None:
    """Send the libraries' log lines (``LOGGERS``) to ``progress`` (which scrubs them), unless
    another ``progress`` already takes them and not ``replace``: a daemon's own lines take
    them for all its Runs, a lone Run's for itself."""
    for name, (level, prefix) in LOGGERS.items():
        logger = logging.getLogger(name)
        present = [h for h in logger.handlers if isinstance(h, _ToProgress)]
        if present and not replace:
            continue
        for handler in present:
            logger.removeHandler(handler)
        logger.addHandler(_ToProgress(progress, prefix))
        logger.setLevel(level)
        logger.propagate = False
