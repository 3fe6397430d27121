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
"""

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
    open_store,
    recent_runs,
    run_view,
    sandbox_mode,
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
)
from thirdshift.bootstrap.status_page import MIN_PAGE_TOKEN, with_page_token
from thirdshift.issue_url import IssueRef
from thirdshift.runs import RunRequest

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
    "checked_settings",
    "credential_secrets",
    "delivery",
    "follow_clock",
    "hidden_from_agents",
    "issue_outcome",
    "known_secrets",
    "log_reader",
    "notification_secrets",
    "notifier_of",
    "open_store",
    "opened_store",
    "outcome_of",
    "reading_scrubber",
    "recent_runs",
    "run_architect",
    "run_daemon",
    "run_doctor",
    "run_event",
    "run_issue",
    "run_parts",
    "run_view",
    "sandbox_mode",
    "setting_secrets",
    "status_facts",
    "stop_seconds",
    "url_secret_parts",
    "usage_totals",
    "with_page_token",
]
