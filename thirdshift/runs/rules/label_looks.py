"""How thirdshift makes each label it puts on issues: its colour and words, in one place. A Run
makes a label it needs when the repository lacks it (the Claim, the Base fix), and ``setup``
makes them all beforehand; both must make the same label."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelLook:
    """A label's colour (six hex digits, as GitHub takes it) and its description."""

    color: str
    description: str


READY_LOOK = LabelLook("0e8a16", "Ready for thirdshift: a Run takes it")
IN_PROGRESS_LOOK = LabelLook("fbca04", "thirdshift is working on this issue")
MERGE_LOOK = LabelLook("5319e7", "thirdshift runs this as a Merge run")
