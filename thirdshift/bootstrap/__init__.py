"""The composition root: the one place real adapters, the scrubber and the clock are built and
wired together.

``thirdshift run``, ``architect``, ``daemon``, ``doctor`` and ``demo`` come through here, so the
demo runs exactly what a user runs. Below this package nothing reads the process environment,
builds an adapter or makes its own scrubber: each receives what it needs from here.

``parts`` is the one factory of a Run's collaborators (``run_parts``); ``credentials`` the
token or App, the GitHub adapter, the Notifier and the secrets the scrubber knows; ``runs`` a
Run and an Architect run to their outcome (the only builder of ``Delivery`` and
``ArchitectRun``); ``daemon``, ``actions`` and ``doctor`` their commands; ``reads`` what the
CLI's read commands get.

Each name is loaded from its module when first used: a read command (``config``, ``status``)
loads only what it needs, so it starts quickly and works on a machine without git.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thirdshift.bootstrap.actions import run_event
    from thirdshift.bootstrap.credentials import (
        GitHubAccess,
        credential_secrets,
        known_secrets,
        notification_secrets,
        notifier_of,
        reading_scrubber,
        setting_secrets,
        url_secret_parts,
    )
    from thirdshift.bootstrap.daemon import architect_schedules, run_daemon, stop_seconds
    from thirdshift.bootstrap.doctor import run_doctor
    from thirdshift.bootstrap.harness_path import check_demo_harness
    from thirdshift.bootstrap.parts import (
        BuiltRun,
        RunCall,
        agent_sandbox,
        hidden_from_agents,
        opened_store,
        run_parts,
    )
    from thirdshift.bootstrap.reads import (
        OpenStore,
        StatusFacts,
        checked_settings,
        follow_clock,
        log_reader,
        model_key_place,
        open_store,
        period_report,
        recent_runs,
        run_view,
        sandbox_mode,
        session_bounds,
        status_facts,
        usage_totals,
    )
    from thirdshift.bootstrap.runs import (
        architect_outcome,
        architect_run,
        delivery,
        issue_outcome,
        outcome_of,
        run_architect,
        run_issue,
        spec_or_issue,
        spec_run,
    )
    from thirdshift.bootstrap.setup import run_setup
    from thirdshift.bootstrap.status_page import MIN_PAGE_TOKEN, with_page_token
    from thirdshift.issue_url import IssueRef
    from thirdshift.runs import RunRequest

_HOMES = {
    "BuiltRun": "thirdshift.bootstrap.parts",
    "GitHubAccess": "thirdshift.bootstrap.credentials",
    "IssueRef": "thirdshift.issue_url",
    "MIN_PAGE_TOKEN": "thirdshift.bootstrap.status_page",
    "OpenStore": "thirdshift.bootstrap.reads",
    "RunCall": "thirdshift.bootstrap.parts",
    "RunRequest": "thirdshift.runs",
    "StatusFacts": "thirdshift.bootstrap.reads",
    "agent_sandbox": "thirdshift.bootstrap.parts",
    "architect_outcome": "thirdshift.bootstrap.runs",
    "architect_run": "thirdshift.bootstrap.runs",
    "architect_schedules": "thirdshift.bootstrap.daemon",
    "check_demo_harness": "thirdshift.bootstrap.harness_path",
    "checked_settings": "thirdshift.bootstrap.reads",
    "credential_secrets": "thirdshift.bootstrap.credentials",
    "delivery": "thirdshift.bootstrap.runs",
    "follow_clock": "thirdshift.bootstrap.reads",
    "hidden_from_agents": "thirdshift.bootstrap.parts",
    "issue_outcome": "thirdshift.bootstrap.runs",
    "known_secrets": "thirdshift.bootstrap.credentials",
    "log_reader": "thirdshift.bootstrap.reads",
    "notification_secrets": "thirdshift.bootstrap.credentials",
    "notifier_of": "thirdshift.bootstrap.credentials",
    "open_store": "thirdshift.bootstrap.reads",
    "opened_store": "thirdshift.bootstrap.parts",
    "outcome_of": "thirdshift.bootstrap.runs",
    "period_report": "thirdshift.bootstrap.reads",
    "reading_scrubber": "thirdshift.bootstrap.credentials",
    "recent_runs": "thirdshift.bootstrap.reads",
    "run_architect": "thirdshift.bootstrap.runs",
    "run_daemon": "thirdshift.bootstrap.daemon",
    "model_key_place": "thirdshift.bootstrap.reads",
    "run_doctor": "thirdshift.bootstrap.doctor",
    "run_event": "thirdshift.bootstrap.actions",
    "run_issue": "thirdshift.bootstrap.runs",
    "run_parts": "thirdshift.bootstrap.parts",
    "run_setup": "thirdshift.bootstrap.setup",
    "run_view": "thirdshift.bootstrap.reads",
    "sandbox_mode": "thirdshift.bootstrap.reads",
    "session_bounds": "thirdshift.bootstrap.reads",
    "setting_secrets": "thirdshift.bootstrap.credentials",
    "spec_or_issue": "thirdshift.bootstrap.runs",
    "spec_run": "thirdshift.bootstrap.runs",
    "status_facts": "thirdshift.bootstrap.reads",
    "stop_seconds": "thirdshift.bootstrap.daemon",
    "url_secret_parts": "thirdshift.bootstrap.credentials",
    "usage_totals": "thirdshift.bootstrap.reads",
    "with_page_token": "thirdshift.bootstrap.status_page",
}
"""Where each name of the package's face lives."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "MIN_PAGE_TOKEN",
    "BuiltRun",
    "GitHubAccess",
    "IssueRef",
    "OpenStore",
    "RunCall",
    "RunRequest",
    "StatusFacts",
    "agent_sandbox",
    "architect_outcome",
    "architect_run",
    "architect_schedules",
    "check_demo_harness",
    "checked_settings",
    "credential_secrets",
    "delivery",
    "follow_clock",
    "hidden_from_agents",
    "issue_outcome",
    "known_secrets",
    "log_reader",
    "model_key_place",
    "notification_secrets",
    "notifier_of",
    "open_store",
    "opened_store",
    "outcome_of",
    "period_report",
    "reading_scrubber",
    "recent_runs",
    "run_architect",
    "run_daemon",
    "run_doctor",
    "run_event",
    "run_issue",
    "run_parts",
    "run_setup",
    "run_view",
    "sandbox_mode",
    "session_bounds",
    "setting_secrets",
    "spec_or_issue",
    "spec_run",
    "status_facts",
    "stop_seconds",
    "url_secret_parts",
    "usage_totals",
    "with_page_token",
]
