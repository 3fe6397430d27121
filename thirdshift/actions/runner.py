"""The runner's language: log groups, workflow commands, the job summary and step outputs.

Everything thirdshift prints on a runner goes through one ``Runner``. A line can never start a
workflow command by accident: progress lines carry a timestamp first, and the data of the
commands thirdshift writes itself is escaped as the runner expects (``%``, ``\\r``, ``\\n``), so
text an agent wrote cannot become a command (``::add-mask::``, ``::set-output``...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path

# The Session logs' artifact: the workflow names it this, then the run's id and attempt.
SESSION_LOGS_ARTIFACT = "thirdshift-session-logs"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Runner:
    """An Actions runner as the process environment describes it (``GITHUB_*``)."""

    def __init__(self, environ: Mapping[str, str], write: Callable[[str], None]) -> None:
        self._environ = environ
        self._write = write

    @staticmethod
    def detected(environ: Mapping[str, str]) -> bool:
        return environ.get("GITHUB_ACTIONS") == "true"

    @property
    def job_url(self) -> str | None:
        """The page of this workflow run, where its log and artifacts are."""
        server = self._environ.get("GITHUB_SERVER_URL", "").rstrip("/")
        repository = self._environ.get("GITHUB_REPOSITORY", "")
        run_id = self._environ.get("GITHUB_RUN_ID", "")
        if not (server and repository and run_id.isdigit()):
            return None
        return f"{server}/{repository}/actions/runs/{run_id}"

    @property
    def session_logs_artifact(self) -> str:
        """The name the workflow uploads this job's Session logs under."""
        run_id = self._environ.get("GITHUB_RUN_ID", "")
        attempt = self._environ.get("GITHUB_RUN_ATTEMPT", "1")
        return f"{SESSION_LOGS_ARTIFACT}-{run_id}-{attempt}"

    def group(self, title: str) -> None:
        self._write(f"::group::{escape_data(title)}")

    def end_group(self) -> None:
        self._write("::endgroup::")

    def error(self, message: str, title: str = "thirdshift") -> None:
        self._write(f"::error title={escape_property(title)}::{escape_data(message)}")

    def warning(self, message: str, title: str = "thirdshift") -> None:
        self._write(f"::warning title={escape_property(title)}::{escape_data(message)}")

    def summary(self, markdown: str) -> None:
        """Append to the job summary (``GITHUB_STEP_SUMMARY``), if the runner gave one."""
        self._append(
            "GITHUB_STEP_SUMMARY", markdown if markdown.endswith("\n") else markdown + "\n"
        )

    def output(self, name: str, value: str) -> None:
        """A step output (``GITHUB_OUTPUT``): one line, so a value holds no newline."""
        single = " ".join(value.split())
        self._append("GITHUB_OUTPUT", f"{name}={single}\n")

    def _append(self, variable: str, text: str) -> None:
        path = self._environ.get(variable)
        if not path:
            return
        with suppress(OSError), Path(path).open("a", encoding="utf-8") as handle:
            handle.write(text)
