"""What a poll hands the daemon to run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pickup:
    """An issue to run: a Ready one, a Rescue of the issue of a crashed Run (``rescue_of``), or
    a review Repair of the pull request a Run opened (``review_of``)."""

    number: int | None  # None: an Architect run, which has no issue
    rescue_of: int | None = None
    review_of: int | None = None  # a review Repair: that Run's pull request has feedback
    merge: bool = False  # a Merge run: the issue carries the merge label (a Base fix)
    architect: bool = False  # an Architect run its schedule asks for (``number`` is None)
    spec: bool = False  # a Spec run: the issue has sub-issues (its Tickets), adr/0032

    @property
    def issue(self) -> int:
        """The issue of a pickup that has one: every one but an Architect run's."""
        if self.number is None:
            raise ValueError("an Architect run's pickup has no issue")
        return self.number
