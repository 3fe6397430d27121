"""How a Run ended, as a value: what the CLI turns into its exit status and last lines, what
the daemon writes in its Activity log and what an Actions job puts in its summary. Nothing
reads an ending off a progress line (adr/0031)."""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.errors import NotClaimed, ThirdshiftError
from thirdshift.run_states import SUCCEEDED_ENDS, RunEnd
from thirdshift.runs.rules.repair_loop import LoopResult


@dataclass(frozen=True)
class RunOutcome:
    """The end of one Run, Architect run or attempt at one.

    ``state`` is its ``RunEnd``: ``ready`` or ``merged`` (a Run's pull request), ``published``,
    ``covered`` or ``skipped`` (an Architect run), ``failed``, ``interrupted`` or ``refused`` (a
    Failed run), ``not claimed`` (another Run holds the issue, or it is no longer wanted:
    nothing changed) or ``stopped`` (an error before anything was recorded: pre-flight, the
    disk, the database). ``cause`` says why for every state but the successful ones;
    ``published`` is what an Architect run published (its issues' URLs)."""

    state: RunEnd
    exit_code: int
    run_id: int | None = None
    pull_request_url: str | None = None
    checks: str | None = None
    cause: str | None = None
    published: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.state in SUCCEEDED_ENDS

    @property
    def not_claimed(self) -> bool:
        return self.state == RunEnd.NOT_CLAIMED

    @classmethod
    def of_error(cls, error: ThirdshiftError, run_id: int | None = None) -> RunOutcome:
        """The outcome of an error a Run stopped on before it could end on its own terms."""
        state = RunEnd.NOT_CLAIMED if isinstance(error, NotClaimed) else RunEnd.STOPPED
        return cls(state, error.exit_code, run_id=run_id, cause=str(error))


def checks_line(result: LoopResult) -> str:
    """What CI said of the head a Run ended on, in a few words (the job summary's Checks)."""
    head = result.head[:7]
    said = (
        f"none appeared on {head}: CI counted as absent" if result.ci_absent else f"green on {head}"
    )
    if result.repairs:
        said += f", after {result.repairs} Repair(s)"
    return said
