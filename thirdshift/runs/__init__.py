"""Runs: one issue to a pull request thirdshift stands behind, or a Failed run that loses
nothing.

Rules, as pure functions and small state machines tested with plain values: ``branches`` (the
Issue branch rule), ``ci_watch``, ``repair_loop`` and ``prompts``. Orchestration, which applies
them through seams: ``delivery`` (the Run), ``claims`` (the Lease and the labels),
``loop_outside`` (the Repair loop's real Outside) and ``failed_run`` (the salvage). GitHub is
reached only through ``ports.GitHubPort``; sessions and clones come from factories the
composition root passes in. The daemon, Actions runs, Architect runs and Spec runs will sit
beside ``delivery`` and reuse these parts.
"""

from thirdshift.runs.delivery import Delivery, RunRequest
from thirdshift.runs.ports import GitHubPort

__all__ = ["Delivery", "GitHubPort", "RunRequest"]
