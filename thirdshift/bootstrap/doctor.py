"""``thirdshift doctor``'s checks, with the real machine, GitHub and Notifier behind them and
every word scrubbed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from thirdshift.bootstrap.credentials import GitHubAccess, notifier_of, reading_scrubber
from thirdshift.bootstrap.harness_path import doctor_environ
from thirdshift.bootstrap.parts import hidden_from_agents
from thirdshift.clock import SystemClock
from thirdshift.doctor import Check, SystemOutside, diagnose
from thirdshift.github import GitHub
from thirdshift.settings import Settings


def run_doctor(
    repositories: Sequence[str],
    *,
    environ: Mapping[str, str],
    report: Callable[[Check], None],
    progress: Callable[[str], None],
    session: bool = False,
) -> list[Check]:
    """Every check of ``thirdshift doctor`` (with ``repositories`` besides the configured ones),
    each handed to ``report`` as it is made, scrubbed: no secret of the environment or the
    settings ever reaches the report."""
    # When these cannot be read, the settings check and the GitHub check say why.
    scrub = reading_scrubber(environ)
    environ = doctor_environ(environ)  # the Harness CLIs a Run would find
    clock = SystemClock(threading.Event())

    def say(line: str) -> None:
        progress(scrub(line))

    def github_for(settings: Settings, repository: tuple[str, str] | None) -> GitHub:
        # A token ignores the repository; a GitHub App needs it to find its installation.
        owner, name = repository or ("", "")
        return GitHubAccess(settings, clock, scrub, say).github(owner, name)

    def notification_targets(settings: Settings) -> tuple[str, ...]:
        return notifier_of(settings, scrub=scrub, progress=say).names

    outside = SystemOutside(
        environ,
        github_for=github_for,
        hidden=lambda settings: hidden_from_agents(settings, environ),
        notification_targets=notification_targets,
    )

    def scrubbed(check: Check) -> Check:
        return replace(check, detail=scrub(check.detail), fix=scrub(check.fix))

    checks = diagnose(
        outside, repositories, report=lambda check: report(scrubbed(check)), session=session
    )
    return [scrubbed(check) for check in checks]
