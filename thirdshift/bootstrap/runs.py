"""A Run of one issue and an Architect run, each from the one factory's parts to its outcome;
the only place ``Delivery`` and ``ArchitectRun`` are built (the orchestration tests build
theirs through ``delivery`` and ``architect_run`` too, with fakes)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from thirdshift.bootstrap.parts import BuiltRun, RunCall, run_parts
from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import ThirdshiftError, UsageError
from thirdshift.issue_url import IssueRef, check_same_host, web_host_of
from thirdshift.records import ProviderOutage
from thirdshift.run_states import RunKind
from thirdshift.runs import (
    ArchitectRequest,
    ArchitectRun,
    Delivery,
    GitHubPort,
    RunHooks,
    RunOutcome,
    RunParts,
    RunRequest,
    RunScope,
    SpecRequest,
    SpecRun,
)
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings, check_repository_name
from thirdshift.store import Store


def outcome_of(
    work: Callable[[], RunOutcome],
    say: Callable[[str], None],
    scrub: Scrubber,
    recorded: Sequence[int] = (),
) -> RunOutcome:
    """``work``'s outcome; an error it stops on is said on the progress lines first, and is
    the outcome (of the Run ``recorded`` names, when it got that far)."""
    try:
        return work()
    except ThirdshiftError as error:
        say(f"thirdshift: {error}")
        outcome = RunOutcome.of_error(error, recorded[-1] if recorded else None)
        return replace(outcome, cause=scrub(str(error)))


def delivery(parts: RunParts, hooks: RunHooks) -> Delivery:
    """A Run of one issue, from its parts: real adapters here, fakes in the orchestration
    tests (the only other builder)."""
    return Delivery(parts, hooks)


def spec_run(
    parts: RunParts,
    hooks: RunHooks,
    clock_for: Callable[[threading.Event], Clock] = SystemClock,
) -> SpecRun:
    """A Spec run, from its parts, as for ``delivery``: each Ticket Run is a ``Delivery`` of
    its own, with the hooks the Spec run gives it and a clock of its own from ``clock_for``
    (a clock's waits end on its Run's interrupt, and a salvage's bound on waiting is its Run's
    alone: one Ticket's Failed run must not cut short another Ticket's CI watch)."""

    def run_ticket(request: RunRequest, ticket_hooks: RunHooks) -> RunOutcome:
        ticket_parts = replace(parts, clock=clock_for(ticket_hooks.interrupt))
        ticket = delivery(ticket_parts, ticket_hooks)
        return outcome_of(lambda: ticket.run(request), ticket_hooks.progress, parts.scrub)

    def deliver(scope: RunScope, spec_hooks: RunHooks) -> RunOutcome:
        return delivery(parts, spec_hooks).deliver(scope)

    return SpecRun(parts, hooks, run_ticket, deliver)


def architect_run(parts: RunParts, hooks: RunHooks, *, web_host: str) -> ArchitectRun:
    """An Architect run, from its parts, as for ``delivery``."""
    return ArchitectRun(parts, hooks, web_host=web_host)


def _ended(built: BuiltRun, work: Callable[[], RunOutcome]) -> RunOutcome:
    return outcome_of(work, built.hooks.progress, built.parts.scrub, built.recorded)


def issue_outcome(settings: Settings, request: RunRequest, call: RunCall) -> RunOutcome:
    """Run one issue to its outcome, for ``call``; see ``run_issue``."""
    check_same_host(request.issue, settings.github_api_url)
    with run_parts(settings, request.issue.owner, request.issue.repo, call) as built:
        run = delivery(built.parts, built.hooks)
        return _ended(built, lambda: run.run(request))


def spec_or_issue_outcome(
    settings: Settings, request: RunRequest, call: RunCall, parallel: int | None
) -> RunOutcome:
    """``thirdshift run`` and a daemon's pickup, for ``call``; see ``spec_or_issue``."""
    check_same_host(request.issue, settings.github_api_url)
    ref = request.issue
    with run_parts(settings, ref.owner, ref.repo, call) as built:
        return _ended(built, lambda: spec_or_issue(built.parts, built.hooks, request, parallel))


def spec_or_issue(
    parts: RunParts,
    hooks: RunHooks,
    request: RunRequest,
    parallel: int | None,
    clock_for: Callable[[threading.Event], Clock] = SystemClock,
) -> RunOutcome:
    """A Spec run when the issue has sub-issues (``parallel`` Tickets at once, default the
    ``spec_parallel`` setting), else a Run of the issue. ``--parallel`` on an issue without
    sub-issues is a usage error (exit 2) that changes nothing. A Rescue continues what
    crashed: a Spec run's as a Spec run, a Run's as a Run; a review Repair is a Run's. The
    orchestration tests call it with their parts, as the daemon's starter does with its own."""
    ref = request.issue

    def spec() -> RunOutcome:
        return spec_run(parts, hooks, clock_for).run(
            SpecRequest(
                ref,
                parallel=parallel or parts.settings.spec_parallel,
                merge=request.merge,
                base=request.base,
                expect_ready=request.expect_ready,
                rescue_of=request.rescue_of,
            )
        )

    if request.review_of is not None:
        return delivery(parts, hooks).run(request)
    if request.rescue_of is not None:
        crashed = parts.store.get_run(request.rescue_of)
        if crashed is not None and crashed.kind == RunKind.SPEC:
            return spec()
        return delivery(parts, hooks).run(request)
    # A daemon's pickup asks for sure: a Spec must never run as one plain issue.
    strict = parallel is not None or request.expect_ready
    if not _sub_issues(parts.github, ref, strict=strict):
        if parallel is not None:
            raise UsageError(
                f"--parallel runs a Spec's Tickets, and #{ref.number} has no "
                "sub-issues; run it without --parallel"
            )
        return delivery(parts, hooks).run(request)
    return spec()


def architect_outcome(settings: Settings, request: ArchitectRequest, call: RunCall) -> RunOutcome:
    """One Architect run to its outcome, for ``call``; see ``run_architect``."""
    owner, name = check_repository_name(f"{request.owner}/{request.name}")
    with run_parts(settings, owner, name, call) as built:
        architect = architect_run(
            built.parts, built.hooks, web_host=web_host_of(settings.github_api_url)
        )
        return _ended(built, lambda: architect.run(request))


def _sub_issues(github: GitHubPort, ref: IssueRef, *, strict: bool) -> tuple[int, ...]:
    """The issue's sub-issues. Unless ``strict`` (``--parallel`` asks for a Spec), a failed
    read is none: the Run's own pre-flight then reads the issue and says what is wrong, as it
    always did."""
    try:
        return github.sub_issues(ref.owner, ref.repo, ref.number)
    except ThirdshiftError:
        if strict:
            raise
        return ()


def run_issue(
    settings: Settings,
    request: RunRequest,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
    agent_environ: Mapping[str, str] | None = None,
    store: Store | None = None,
    claimant: str = "thirdshift run",
    stopped_because: Callable[[], str | None] = lambda: None,
    on_recorded: Callable[[int], None] = lambda _run_id: None,
    on_outage: Callable[[ProviderOutage], None] = lambda _outage: None,
    specs: bool = False,
    parallel: int | None = None,
) -> RunOutcome:
    """Run one issue to its outcome. Errors before the Run starts (pre-flight) are reported
    on ``progress``, change nothing and are the outcome.

    ``environ`` is thirdshift's own process environment: its secrets are scrubbed and emptied
    for git. ``agent_environ`` (default: the same) is what the Harness's environment is built
    from; the demo gives one pointing the CLI at the scripted model server.

    A daemon passes its ``store`` (shared by its Runs), its name as ``claimant``, what says
    why it stopped a Run (``stopped_because``) and what learns the Run's id once it is recorded
    (``on_recorded``) and what learns of a provider outage (``on_outage``: the daemon's
    pauses); each Run still gets its own clock, GitHub adapter and interrupt.

    ``specs`` (the ``run`` command's and a daemon's): an issue with sub-issues is a Spec, run
    as a Spec run with ``parallel`` Tickets at once (adr/0032)."""
    call = RunCall(
        environ,
        progress,
        emit_url,
        interrupt,
        claimant,
        agent_environ=agent_environ,
        store=store,
        stopped_because=stopped_because,
        on_recorded=on_recorded,
        on_outage=on_outage,
    )
    if specs:
        return spec_or_issue_outcome(settings, request, call, parallel)
    return issue_outcome(settings, request, call)


def run_architect(
    settings: Settings,
    request: ArchitectRequest,
    *,
    interrupt: threading.Event,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    claimant: str = "thirdshift architect",
) -> RunOutcome:
    """One Architect run on ``request``'s repository, to its outcome (exit status 0 published,
    covered or skipped; 1 failed; 3 another Architect run holds the repository). A daemon
    calls ``architect_outcome`` with its store, its name and what learns the Run's id, as for
    ``run_issue``."""
    call = RunCall(environ, progress, emit_url, interrupt, claimant)
    return architect_outcome(settings, request, call)
