"""Runs: one issue to a pull request thirdshift stands behind, or a Failed run that loses
nothing.

Rules, as pure functions and small state machines tested with plain values: ``branches`` (the
Issue branch rule), ``ci_watch``, ``repair_loop``, ``approval`` and ``prompts``. The Run kinds,
``delivery`` (the Run) and ``architect`` (the Architect run), are short lists of the steps in
``runs.steps`` (adr/0031), each taking a frozen per-Run context (``scope``) and the narrow
ports it uses. GitHub is reached only through ``ports``; sessions and clones come from
factories the composition root passes in.

This module is the package's public face: the composition root, the daemon, doctor and the
CLI import what they need from here, never from a private module of ``runs``.
"""

from thirdshift.runs.architect.run import ArchitectRequest, ArchitectRun
from thirdshift.runs.claims import IssueText, read_approval
from thirdshift.runs.delivery import Delivery
from thirdshift.runs.notices import spec_ticket_lines
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.ports import NO_NOTIFIER, GitHubPort, Notifier
from thirdshift.runs.rules.approval import PASSED_OVER, ROLES_THAT_LABEL
from thirdshift.runs.rules.review import read_feedback
from thirdshift.runs.rules.roles import PERMISSIONS_THAT_PUSH, token_role
from thirdshift.runs.scope import RunHooks, RunParts, RunRequest, RunScope
from thirdshift.runs.spec.claim import SpecRequest
from thirdshift.runs.spec.run import SpecRun

__all__ = [
    "NO_NOTIFIER",
    "PASSED_OVER",
    "PERMISSIONS_THAT_PUSH",
    "ROLES_THAT_LABEL",
    "ArchitectRequest",
    "ArchitectRun",
    "Delivery",
    "GitHubPort",
    "IssueText",
    "Notifier",
    "RunHooks",
    "RunOutcome",
    "RunParts",
    "RunRequest",
    "RunScope",
    "SpecRequest",
    "SpecRun",
    "read_approval",
    "read_feedback",
    "spec_ticket_lines",
    "token_role",
]
