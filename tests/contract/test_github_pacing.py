"""The GitHub adapter paced under the stand-in's secondary limits (points and writes a minute, as
GitHub documents them). The stand-in and the adapter share one simulated time: the adapter's
waits move it, so minutes of pacing take a moment. Unpaced, the same requests meet GitHub's
refusals; paced, none, and nothing is sent early into a wait GitHub asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, TOKENS, Sandbox
from thirdshift.github import GitHub, PaceBudget, Pacer
from thirdshift.sandbox.github.limits import SecondaryLimits
from thirdshift.scrub import Scrubber


@dataclass
class Simulated:
    """A clock whose waits move time instead of taking it: the adapter's, the pacer's and the
    stand-in's secondary limits'."""

    elapsed: float = 0.0
    waits: list[float] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.elapsed += seconds

    def salvaging(self, seconds: float) -> None:
        """Waits take no time here."""


def limited(sandbox: Sandbox, time: Simulated) -> SecondaryLimits:
    limits = SecondaryLimits(points_per_minute=120, writes_per_minute=20, now=time.monotonic)
    sandbox.stand_in.secondary = limits
    return limits


def adapter(sandbox: Sandbox, time: Simulated, pacer: Pacer | None) -> GitHub:
    token = TOKENS["wes"]
    return GitHub(
        sandbox.stand_in.api_url,
        token,
        scrub=Scrubber([token]),
        clock=time,
        progress=time.lines.append,
        pacer=pacer,
    )


def work(github: GitHub, reads: int, writes: int) -> int:
    """``reads`` reads of the repository and ``writes`` labels added to a new issue; the
    issue's number."""
    number = github.open_issue(OWNER, NAME, title="Paced", body="Pacing.", labels=[]).number
    for _ in range(reads):
        github.repo(OWNER, NAME)
    for index in range(writes):
        github.add_label(OWNER, NAME, number, f"paced-{index}")
    return number


def test_unpaced_requests_meet_the_secondary_limit_and_wait_as_told(sandbox: Sandbox) -> None:
    """The control: the same work without a pacer is refused, and the adapter waits out each
    refusal's retry-after rather than sending again early."""
    time = Simulated()
    limits = limited(sandbox, time)
    work(adapter(sandbox, time, None), reads=200, writes=10)
    assert limits.refused > 0
    assert limits.early == 0
    assert any("rate limit" in line for line in time.lines)


def test_paced_requests_never_meet_the_secondary_limit(sandbox: Sandbox) -> None:
    time = Simulated()
    limits = limited(sandbox, time)
    budget = PaceBudget(requests_per_minute=100, writes_per_minute=15, writes_per_hour=400)
    pacer = Pacer(budget, monotonic=time.monotonic)
    github = adapter(sandbox, time, pacer)

    number = work(github, reads=200, writes=30)

    assert limits.refused == 0
    assert time.elapsed >= 120  # over 231 requests at 100 a minute
    assert any(line.startswith("pacing GitHub requests: waiting") for line in time.lines)
    labels = sandbox.github("wes").get_repo(FULL_NAME).get_issue(number).labels
    assert len(labels) == 30


def test_two_adapters_sharing_a_pacer_keep_to_one_budget(sandbox: Sandbox) -> None:
    """A daemon's polls and each of its Runs have adapters of their own; GitHub counts the
    secondary limits per user, so they share one pacer."""
    time = Simulated()
    limits = limited(sandbox, time)
    pacer = Pacer(PaceBudget(requests_per_minute=100), monotonic=time.monotonic)
    first, second = adapter(sandbox, time, pacer), adapter(sandbox, time, pacer)
    for _ in range(150):
        first.repo(OWNER, NAME)
        second.repo(OWNER, NAME)
    assert limits.refused == 0
    assert time.elapsed >= 120
