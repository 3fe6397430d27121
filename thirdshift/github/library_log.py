"""PyGithub's own log lines (``Following Github server redirection from ... to ...``, at INFO) as
thirdshift's progress lines: through the process's scrubber, never raw to stderr and never to
the root logger another library may have set up."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

LOGGER = "github"


class _ToProgress(logging.Handler):
    def __init__(self, progress: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        # A log line must never fail the request it describes; and logging's own error report
        # (handleError) would print the record's raw arguments, a URL with a token, to stderr.
        with contextlib.suppress(Exception):
            self.progress(f"GitHub: {record.getMessage()}")


def route_library_log(progress: Callable[[str], None], *, replace: bool = False) -> None:
    """Send PyGithub's log lines at INFO and above to ``progress`` (which scrubs them), unless
    another ``progress`` already takes them and not ``replace``: a daemon's own lines take
    them for all its Runs, a lone Run's for itself."""
    logger = logging.getLogger(LOGGER)
    present = [h for h in logger.handlers if isinstance(h, _ToProgress)]
    if present and not replace:
        return
    for handler in present:
        logger.removeHandler(handler)
    logger.addHandler(_ToProgress(progress))
    logger.setLevel(logging.INFO)
    logger.propagate = False
