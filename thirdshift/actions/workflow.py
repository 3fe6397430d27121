"""The workflow ``thirdshift actions init`` writes into a repository.

Decisions a reader of the file would otherwise question, each kept here with its reason:

- ``concurrency`` is on the job, keyed by the issue, and never cancels: a second Ready label on
  the same issue queues behind the first run instead of killing it mid-salvage, and runs that
  other labels start are skipped before they join the group (GitHub keeps one waiting run per
  group; a newer one would push the waiting Run out).
- ``timeout-minutes`` covers the first session and a CI watch whole: the session's wall-clock
  limit, then CI's timeout, plus a margin for the install. A hosted job stops after 6 hours, so
  when the limits asked for do not fit, the file lowers both (in proportion). A Run whose
  Repairs take it longer is cancelled as any job is, and saves its work in the window.
- The settings a Run needs to agree with this file (the labels, the limits) are written into
  the step's environment: the runner has no config file.
- The Run step ``exec``s thirdshift: on cancel the runner signals the step's own process.
- No ``${{ }}`` expression appears inside a ``run:`` script: every value reaches the shell as an
  environment variable, so an issue title can never become shell code.
- A label or install the user chose is refused when it holds a line break (it would end the
  comment or string it is written in, and start YAML of its own) or ``${{`` (GitHub would
  evaluate it as an expression, which may read the secrets).
- With a GitHub App (``THIRDSHIFT_APP_ID`` and ``THIRDSHIFT_APP_PRIVATE_KEY`` secrets)
  thirdshift acts with the App's installation tokens, whose pushes start the repository's CI;
  pushes made with ``GITHUB_TOKEN`` start no workflow, so the pull request would wait for
  checks that never come. thirdshift is given the App's key and mints the tokens itself, renewed
  as they age: an installation token lasts an hour, a Run may last several.
- On cancellation GitHub sends SIGINT, SIGTERM 7.5 s later and kills 2.5 s after that: the stop
  grace and the salvage's time for GitHub's retries are set short enough to save the work first.
- The Session logs are uploaded whatever happened (``always()``), cancellation included, and
  only from a private (or internal) repository: anyone may download a public repository's
  artifacts, and a Session log is everything the agent printed (adr/0043). A public repository
  keeps the job summary, the job's log of progress lines and the Failed-run comment.
- What runs with the secrets is pinned (adr/0036): actions at commit SHAs, the Harness CLI by
  ``npm ci`` from the lock ``actions init`` writes beside the file, permissions on the job only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from thirdshift.actions.pins import (
    CHECKOUT,
    LOCK_DIRECTORY,
    SETUP_NODE,
    SETUP_PYTHON,
    UPLOAD_ARTIFACT,
)
from thirdshift.actions.runner import SESSION_LOGS_ARTIFACT
from thirdshift.errors import ConfigError
from thirdshift.harness_registry import DEFAULT_HARNESS, harness_entry


@dataclass(frozen=True)
class WorkflowChoices:
    install: str  # what ``pip install`` is given for thirdshift
    harness: str = DEFAULT_HARNESS
    ready_label: str = "ready-for-agent"
    in_progress_label: str = "in-progress"
    session_wall_seconds: float = 4 * 3600
    ci_timeout_seconds: float = 3 * 3600


HOSTED_JOB_LIMIT_MINUTES = 360
# Beyond the session's and CI's limits: the install, pushes, the Repair loop's own work.
MARGIN_MINUTES = 30


def timeout_minutes(choices: WorkflowChoices) -> int:
    """A whole Run: the session's limit, CI's, and the margin (``fitted`` keeps this within
    the 6 hours a GitHub-hosted job may last)."""
    return wanted_minutes(choices)


def wanted_minutes(choices: WorkflowChoices) -> int:
    return int((choices.session_wall_seconds + choices.ci_timeout_seconds + 59) // 60) + (
        MARGIN_MINUTES
    )


def fitted(choices: WorkflowChoices) -> WorkflowChoices:
    """``choices`` whose session and CI limits, with the margin, fit a GitHub-hosted job: when
    they do not, both are lowered in proportion, to whole minutes, so the job's
    ``timeout-minutes`` still covers the first session and a CI watch whole. (A Run whose
    Repairs go past it is cancelled as any job is, and saves its work in the window.)"""
    if wanted_minutes(choices) <= HOSTED_JOB_LIMIT_MINUTES:
        return choices
    room = (HOSTED_JOB_LIMIT_MINUTES - MARGIN_MINUTES) * 60
    total = choices.session_wall_seconds + choices.ci_timeout_seconds
    session = max(60.0, (choices.session_wall_seconds * room / total) // 60 * 60)
    return replace(choices, session_wall_seconds=session, ci_timeout_seconds=room - session)


# Line breaks of any kind YAML or a reader of the file would honour, and other controls.
_UNWRITABLE = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]|\$\{\{")


def check_written(what: str, variable: str, value: str) -> None:
    """Refuse a chosen ``value`` the workflow file cannot hold as plain text: a line break or
    a control would start YAML of its own, ``${{`` an expression GitHub evaluates (with the
    secrets in reach). ``variable`` names where the value came from, for the fix."""
    found = _UNWRITABLE.search(value)
    if found is not None:
        shown = "${{" if found.group() == "${{" else f"the control character {found.group()!r}"
        raise ConfigError(
            f"the {what} {value!r} holds {shown}, which the workflow file cannot hold as text; "
            f"choose one without it ({variable})"
        )


def workflow_text(choices: WorkflowChoices) -> str:
    """The workflow file for ``choices``, its limits ``fitted`` to a GitHub-hosted job. A label
    or install it cannot hold as text raises ConfigError (``check_written``)."""
    check_written("Ready label", "THIRDSHIFT_READY_LABEL", choices.ready_label)
    check_written("In-progress label", "THIRDSHIFT_IN_PROGRESS_LABEL", choices.in_progress_label)
    check_written("install", "--install", choices.install)
    choices = fitted(choices)
    entry = harness_entry(choices.harness)
    key = entry.api_key_variable
    label = choices.ready_label.replace("'", "''")
    condition = f"github.event_name == 'workflow_dispatch' || github.event.label.name == '{label}'"
    return f"""# Written by `thirdshift actions init`: a Run for each issue labelled
# {choices.ready_label}.
# The reasons for each choice: thirdshift's documentation, docs/github-actions.md.
name: thirdshift

on:
  issues:
    types: [labeled]
  workflow_dispatch:
    inputs:
      issue:
        description: The number of the issue to run
        required: true
        type: string

# Nothing workflow-wide: the job asks for what it uses.
permissions: {{}}

jobs:
  run:
    if: {json.dumps(condition)}
    # On the job, not the workflow: runs that other labels start (and skip) never join the
    # group, so they cannot push a waiting Run out of it.
    concurrency:
      group: thirdshift-issue-${{{{ github.event.issue.number || inputs.issue }}}}
      cancel-in-progress: false
    runs-on: ubuntu-latest
    timeout-minutes: {timeout_minutes(choices)}
    # What thirdshift does with the workflow's token when no GitHub App is set.
    permissions:
      contents: write  # push the Issue branch; read the Harness CLI's lock
      issues: write  # the Claim's label and comment, the Failed-run comment
      pull-requests: write  # open the pull request, mark it ready or draft
      checks: read  # the CI watch
      statuses: read  # the CI watch
      actions: write  # a Check re-run re-runs failed jobs
    env:
      # With a GitHub App, thirdshift mints its installation tokens (renewed as they age).
      THIRDSHIFT_GITHUB_APP_ID: ${{{{ secrets.THIRDSHIFT_APP_ID }}}}
{_install_steps(choices)}      - name: Run thirdshift
        id: thirdshift
        env:
          THIRDSHIFT_GITHUB_APP_PRIVATE_KEY: ${{{{ secrets.THIRDSHIFT_APP_PRIVATE_KEY }}}}
          # With a PostgreSQL the runner reaches, Leases and history are shared with daemons.
          THIRDSHIFT_DATABASE_URL: ${{{{ secrets.THIRDSHIFT_DATABASE_URL }}}}
          # Without an App, the workflow's own token; GitHub will not say whose it is.
          GITHUB_TOKEN: ${{{{ secrets.GITHUB_TOKEN }}}}
          THIRDSHIFT_GITHUB_LOGIN: >-
            ${{{{ env.THIRDSHIFT_GITHUB_APP_ID == '' && 'github-actions[bot]' || '' }}}}
          {key}: ${{{{ secrets.{key} }}}}
          THIRDSHIFT_HOME: ${{{{ runner.temp }}}}/thirdshift
          THIRDSHIFT_HARNESS: {choices.harness}
          THIRDSHIFT_READY_LABEL: {json.dumps(choices.ready_label)}
          THIRDSHIFT_IN_PROGRESS_LABEL: {json.dumps(choices.in_progress_label)}
          THIRDSHIFT_SESSION_WALL_SECONDS: "{choices.session_wall_seconds:g}"
          THIRDSHIFT_CI_TIMEOUT_SECONDS: "{choices.ci_timeout_seconds:g}"
          THIRDSHIFT_SESSION_STOP_GRACE_SECONDS: "2"
          THIRDSHIFT_SALVAGE_WAIT_SECONDS: "4"
          # A hosted runner is a machine of its own for this one job, which bounds the
          # session; its non-root user may not make cgroups (adr/0039).
          THIRDSHIFT_UNSAFE_UNBOUNDED_SESSIONS: "true"
        # exec: on cancel the runner signals the step's process, which must be thirdshift
        # itself (a shell would not pass SIGINT on).
        run: |
          PATH="$GITHUB_WORKSPACE/{LOCK_DIRECTORY}/node_modules/.bin:$PATH"
          exec thirdshift run --event "$GITHUB_EVENT_PATH"

      # Not on a public repository: anyone may download its artifacts.
      - name: Keep the Session logs
        if: always() && github.event.repository.private == true
        uses: {UPLOAD_ARTIFACT.uses}
        with:
          name: {SESSION_LOGS_ARTIFACT}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
          path: ${{{{ runner.temp }}}}/thirdshift/logs
          if-no-files-found: ignore
"""


def _install_steps(choices: WorkflowChoices) -> str:
    """The job's steps up to the Run: Python, Node.js, and thirdshift, the Harness CLI (from
    its lock beside the workflow), bubblewrap and socat installed."""
    entry = harness_entry(choices.harness)
    return f"""    steps:
      # Only the Harness CLI's lock: thirdshift clones the repository itself.
      - uses: {CHECKOUT.uses}
        with:
          persist-credentials: false
          sparse-checkout: {LOCK_DIRECTORY}

      - uses: {SETUP_PYTHON.uses}
        with:
          python-version: "3.12"

      - uses: {SETUP_NODE.uses}
        with:
          node-version: "22"

      - name: Install thirdshift, the {choices.harness} CLI, bubblewrap and socat
        env:
          THIRDSHIFT_INSTALL: {json.dumps(choices.install)}
        run: |
          sudo apt-get update -q
          sudo apt-get install -y -q bubblewrap socat
          # Ubuntu runners restrict unprivileged user namespaces, which bubblewrap needs.
          sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 || true
          python -m pip install --quiet "$THIRDSHIFT_INSTALL"
          # {entry.pinned_package} and its packages, each checked against the lock's hash.
          npm ci --prefix {LOCK_DIRECTORY} --no-audit --no-fund

"""
