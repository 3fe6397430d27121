"""One line of ``thirdshift doctor``'s report, ``Check``, and the two ways every check module
makes one alike: a message cut into its problem and its fix, and a check skipped for a reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["PASS", "WARN", "FAIL", "SKIP"]

CHECK_VERSION = 1
"""The ``version`` of the ``doctor_check`` shape (docs/json.md)."""


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it went, what was found, and (for a WARN
    or a FAIL) what to do about it."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def json(self) -> dict[str, str | int]:
        """The ``doctor_check`` shape of docs/json.md (``doctor --json``). Made here, not in
        ``report.shapes``: the doctor and the report are layers that do not import each other."""
        return {
            "type": "doctor_check",
            "version": CHECK_VERSION,
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
        }


def split_fix(message: str) -> tuple[str, str]:
    """A thirdshift message cut into its problem and its fix (after the first ``"; "``)."""
    problem, _, fix = message.partition("; ")
    return problem, fix


def skipped(name: str, why: str) -> Check:
    """A check that cannot run without one that failed before it, saying why."""
    return Check(name, "SKIP", f"skipped: {why}")
