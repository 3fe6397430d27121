"""The rules of a Run, as pure functions and small state machines tested with plain values: the
Issue branch rule (``branches``), approval of an issue's text, the CI watch and the Repair loop,
review feedback, the prompts, the Architect run's result file and gates (``plans``, ``gates``,
``published_issues``), a Spec run's Tickets (``tickets``, ``ticket_texts``, ``ticket_rescue``),
the post-mortem, label looks, Base fixes and Failed-run causes. Nothing here reaches GitHub, git,
the database or a Harness (the ``rules`` import contract).

This module is the light face of the rules for packages outside ``runs``: the daemon's rules
and ``setup`` import from here, and the status page's Run page its Session lines, without
pulling in the adapters the ``runs`` face brings."""

from thirdshift.runs.rules.approval import ROLES_THAT_LABEL
from thirdshift.runs.rules.label_looks import IN_PROGRESS_LOOK, MERGE_LOOK, READY_LOOK
from thirdshift.runs.rules.plans import (
    IDEA_LABEL,
    LABEL_COLORS,
    LABEL_WORDS,
    PLAN_LABEL,
    TRIAGE_LABEL,
)
from thirdshift.runs.rules.post_mortem import condensed, history_line

__all__ = [
    "IDEA_LABEL",
    "IN_PROGRESS_LOOK",
    "LABEL_COLORS",
    "LABEL_WORDS",
    "MERGE_LOOK",
    "PLAN_LABEL",
    "READY_LOOK",
    "ROLES_THAT_LABEL",
    "TRIAGE_LABEL",
    "condensed",
    "history_line",
]
