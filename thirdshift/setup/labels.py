"""The labels thirdshift puts on issues, and making those a repository lacks (read first, so a
second ``setup`` makes none)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from thirdshift.records import RepoInfo
from thirdshift.runs.rules import (
    IDEA_LABEL,
    IN_PROGRESS_LOOK,
    LABEL_COLORS,
    LABEL_WORDS,
    MERGE_LOOK,
    PLAN_LABEL,
    READY_LOOK,
    TRIAGE_LABEL,
)
from thirdshift.settings import Settings


@dataclass(frozen=True)
class LabelSpec:
    """A repository label as ``setup`` makes it: GitHub's ``color`` is six hex digits."""

    name: str
    color: str
    description: str


@dataclass(frozen=True)
class LabelMade:
    """What ``make_labels`` did with one label."""

    label: LabelSpec
    outcome: Literal["created", "exists"]


class LabelWrites(Protocol):
    """The part of GitHub ``setup`` uses."""

    def repo(self, owner: str, name: str) -> RepoInfo:
        """The repository; raises ``NotFound`` when GitHub shows none by that name to the
        credentials."""
        ...

    def label_exists(self, owner: str, name: str, label: str) -> bool:
        """Whether the repository has ``label`` (GitHub ignores its case)."""
        ...

    def ensure_label(self, owner: str, name: str, label: str, color: str, description: str) -> None:
        """Create the label unless it exists; a label made meanwhile by someone else is fine."""
        ...


def thirdshift_labels(settings: Settings) -> tuple[LabelSpec, ...]:
    """Every label thirdshift reads or writes on issues, as ``settings`` names them, each once
    (GitHub's label names ignore case). The colours and words are those the Claim, the Base fix
    and the Architect run give the labels they make themselves (``runs.rules.label_looks``)."""
    labels = (
        LabelSpec(settings.ready_label, READY_LOOK.color, READY_LOOK.description),
        LabelSpec(settings.in_progress_label, IN_PROGRESS_LOOK.color, IN_PROGRESS_LOOK.description),
        LabelSpec(settings.merge_label, MERGE_LOOK.color, MERGE_LOOK.description),
        *(
            LabelSpec(label, LABEL_COLORS[label], LABEL_WORDS[label])
            for label in (PLAN_LABEL, IDEA_LABEL, TRIAGE_LABEL)
        ),
    )
    seen: set[str] = set()
    kept: list[LabelSpec] = []
    for label in labels:
        if label.name.lower() not in seen:
            seen.add(label.name.lower())
            kept.append(label)
    return tuple(kept)


def make_labels(
    github: LabelWrites, owner: str, name: str, labels: Sequence[LabelSpec]
) -> tuple[LabelMade, ...]:
    """Create each of ``labels`` the repository lacks, reading first: a label that exists is
    left as it is (its colour and words are the repository's own now)."""
    made: list[LabelMade] = []
    for label in labels:
        if github.label_exists(owner, name, label.name):
            made.append(LabelMade(label, "exists"))
            continue
        github.ensure_label(owner, name, label.name, label.color, label.description)
        made.append(LabelMade(label, "created"))
    return tuple(made)
