"""An Actions run, from an ``issues`` event payload (``thirdshift run --event``, adr/0012):
the event's decision, the daemon's rules for the labeller and the issue, the Run as a log
group, and its outcome as the job summary and step outputs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from thirdshift.actions import EventDecision, Runner, decide, read_event
from thirdshift.bootstrap.credentials import GitHubAccess, notifier_of, run_secrets
from thirdshift.bootstrap.parts import RunCall, opened_store, ready_rules
from thirdshift.bootstrap.runs import issue_outcome
from thirdshift.clock import SystemClock
from thirdshift.daemon.ready import blocker_reason, labeller_reason, pass_over_notification
from thirdshift.errors import NotFound, UsageError
from thirdshift.github import GitHub
from thirdshift.issue_url import IssueRef, web_host_of
from thirdshift.records import Run, SessionRecord
from thirdshift.run_states import FAILED_ENDS, RunEnd
from thirdshift.runs import PASSED_OVER, RunOutcome, RunRequest
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store


def run_event(
    settings: Settings,
    event_path: Path,
    *,
    environ: Mapping[str, str],
    interrupt: threading.Event,
    progress: Callable[[str], None],
    write: Callable[[str], None],
    emit_url: Callable[[str], None],
) -> int:
    """Run the issue an ``issues`` event payload names (``thirdshift run --event``, on GitHub
    Actions), or say in one line why there is none and return 0. On a runner, the Run's
    lines are a log group, its errors workflow commands, its outcome the job summary and
    step outputs (``write`` puts a line where the runner reads commands)."""
    decision = _decision(settings, event_path, environ)
    if not decision.runs:
        progress(f"nothing to run: {decision.why}")
        return 0
    if "github_api_url" not in settings.model_fields_set and environ.get("GITHUB_API_URL"):
        # The runner names the GitHub it serves: GitHub Enterprise works as github.com does.
        settings = settings.model_copy(update={"github_api_url": environ["GITHUB_API_URL"]})
    runner = Runner(environ, write) if Runner.detected(environ) else None
    scrub = Scrubber.from_environment(environ, run_secrets(settings))
    access = GitHubAccess(settings, SystemClock(interrupt), scrub, progress)
    reason = _reason_to_wait(settings, decision, access)
    if reason is not None:
        progress(f"nothing to run: {reason}")
        return 0
    claimant = (
        f"GitHub Actions, labelled by {decision.sender}"
        if decision.labelled
        else f"GitHub Actions, started by {decision.sender}"
    )
    call = RunCall(environ, progress, emit_url, interrupt, claimant)
    return _run(settings, decision, runner, scrub, call)


def _decision(settings: Settings, event_path: Path, environ: Mapping[str, str]) -> EventDecision:
    """What the event payload at ``event_path`` asks for; a UsageError when it cannot be read."""
    try:
        text = event_path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--event {event_path}: cannot be read ({error.strerror})") from error
    return decide(
        read_event(text, str(event_path)), settings.ready_label, environ.get("GITHUB_EVENT_NAME")
    )


def _issue_ref(settings: Settings, decision: EventDecision) -> IssueRef:
    host = web_host_of(settings.github_api_url)
    return IssueRef(host, decision.owner, decision.name, decision.number)


def _reason_to_wait(
    settings: Settings, decision: EventDecision, access: GitHubAccess
) -> str | None:
    """Why the event's issue is not run (None: it is): the labeller may not act on it (a
    label nobody may act on is announced once, as its event comes once), or the daemon's
    other rules hold it back."""
    owner, name, number = decision.owner, decision.name, decision.number
    github = access.github(owner, name)
    try:
        role = github.permission(owner, name, decision.sender)
    except NotFound:
        role = "none"  # not a collaborator at all
    reason = labeller_reason(decision.sender, role, ready_rules(settings))
    if reason is not None and decision.labelled:
        ref = _issue_ref(settings, decision)
        notifier_of(settings, scrub=access.scrub, progress=access.progress).notify(
            pass_over_notification(
                f"{owner}/{name}",
                number,
                f"https://{ref.host}/{owner}/{name}/issues/{number}",
                reason,
            )
        )
    if reason is None:
        reason = _held_back(settings, github, decision)
    return reason


def _held_back(settings: Settings, github: GitHub, decision: EventDecision) -> str | None:
    """The daemon's other rules hold here too: an excluded label or an open blocker waits."""
    owner, name, number = decision.owner, decision.name, decision.number
    issue = github.issue(owner, name, number)
    excluded = sorted(
        {label.lower() for label in issue.labels} & {x.lower() for x in settings.excluded_labels}
    )
    if excluded:
        return f"#{number} carries {', '.join(excluded)}; remove that label to run it"
    return blocker_reason(github.blockers(owner, name, number))


def _run(
    settings: Settings,
    decision: EventDecision,
    runner: Runner | None,
    scrub: Scrubber,
    call: RunCall,
) -> int:
    """The event's Run, in a log group on a runner, to its exit status."""
    ref = _issue_ref(settings, decision)
    warnings: list[str] = []

    def say(line: str) -> None:
        call.progress(line)
        # Warnings are no ending: the runner shows them beside the outcome, once it is known.
        if line.startswith("warning: "):
            warnings.append(scrub(line.removeprefix("warning: ")))

    with opened_store(settings) as store:
        if runner is not None:
            runner.group(f"thirdshift: a Run on {ref}")
        try:
            request = RunRequest(
                issue=ref,
                expect_ready=decision.labelled,
                job_url=runner.job_url if runner else None,
            )
            outcome = issue_outcome(settings, request, replace(call, progress=say, store=store))
        finally:
            if runner is not None:
                runner.end_group()
        if outcome.not_claimed:
            # An approval the text voided is the one reason worth more than "not claimed".
            cause = outcome.cause or ""
            passed = cause if PASSED_OVER in cause else f"{ref} is already being worked on"
            call.progress(f"nothing to run: {passed}")
            return 0
        if runner is not None:
            _show_outcome(runner, store, ref, outcome, warnings, scrub, public=decision.public)
        return outcome.exit_code


def _show_outcome(
    runner: Runner,
    store: Store,
    ref: IssueRef,
    outcome: RunOutcome,
    warnings: Sequence[str],
    scrub: Scrubber,
    *,
    public: bool,
) -> None:
    """The outcome on the runner: the stop's cause as an error, the warnings, the summary
    (``public``: the repository's artifacts are anyone's, so its Session logs were not kept)."""
    # In the order they were said: the warnings of the Run, then the error it stopped on.
    for message in warnings:
        runner.warning(message)
    if outcome.state == RunEnd.STOPPED and outcome.cause:
        runner.error(scrub(outcome.cause))
    run = store.get_run(outcome.run_id) if outcome.run_id is not None else None
    sessions = store.run_sessions(run.id) if run else []
    _report(runner, run, ref, outcome, sessions=sessions, public=public)


def _report(
    runner: Runner,
    run: Run | None,
    ref: IssueRef,
    outcome: RunOutcome,
    *,
    sessions: Sequence[SessionRecord] = (),
    public: bool = True,
) -> None:
    """The job summary and step outputs of a Run from its outcome (``run``: its record, None
    when it stopped before it was recorded): what a reviewer needs without opening the log.
    On a ``public`` repository the workflow uploads no Session logs, and the summary says so."""
    state = run.state if run else "not recorded"
    url = outcome.pull_request_url or ""
    # A Failed run's cause (a Run that stopped on an error is reported by its own annotation).
    cause = outcome.cause if run is not None and outcome.state in FAILED_ENDS else None
    rows = [
        ("Issue", f"{ref}"),
        ("Pull request", url or "none"),
        ("State", state),
    ]
    if outcome.checks:
        rows.append(("Checks", outcome.checks))
    elif cause:
        rows.append(("Checks", "see the cause"))
    if cause:
        rows.append(("Cause", _code_span(cause)))
    if sessions:
        rows.append(("Sessions", ", ".join(_session_cell(s) for s in sessions)))
        rows.append(("Cost", _cost(sessions)))
    if run is not None and run.last_session_log:
        rows.append(("Last Session log", _code_span(Path(run.last_session_log).name)))
    if sessions and public:
        rows.append(
            ("Session logs", "not uploaded: anyone may download a public repository's artifacts")
        )
    elif sessions and runner.job_url:
        artifact = _code_span(runner.session_logs_artifact)
        rows.append(("Session logs", f"artifact {artifact} on [the run's page]({runner.job_url})"))
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    runner.summary(f"### thirdshift: {ref}\n\n| | |\n|---|---|\n{table}\n")
    runner.output("state", state)
    if url:
        runner.output("pull-request-url", url)
    if outcome.exit_code != 0 and cause:
        runner.error(cause, title=f"thirdshift could not finish {ref}")


def _cost(sessions: Sequence[SessionRecord]) -> str:
    """What the sessions cost, as far as their Harnesses reported it."""
    costs = [s.usage.cost_usd for s in sessions if s.usage.cost_usd is not None]
    cost = f"${sum(costs):.4f}" if costs else "not reported"
    if costs and len(costs) < len(sessions):
        cost += f" ({len(sessions) - len(costs)} session(s) reported none)"
    return cost


def _session_cell(session: SessionRecord) -> str:
    """One session in the summary: its kind, Harness and how it ended."""
    return _code_span(f"{session.kind} ({session.harness}, {session.state})")


def _code_span(text: str) -> str:
    """``text`` as inline code in a table cell: no markup, link or line break of its own."""
    flat = " ".join(text.split()).replace("`", "'").replace("|", "/")
    return f"`{flat}`"
