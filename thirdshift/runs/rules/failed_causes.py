"""What a Failed run's cause says about it: a Policy refusal, a stopped Run (Ctrl-C, SIGTERM,
every provider down) or another failure, and the short reason its commit carries."""

from __future__ import annotations

from thirdshift.defang import defanged
from thirdshift.errors import Interrupted
from thirdshift.run_states import RunEnd
from thirdshift.runs.rules.repair_loop import PolicyRefusal
from thirdshift.sessions import LaterStepFailed
from thirdshift.sessions.rules import ProviderUnavailable


def is_policy_refusal(error: BaseException) -> bool:
    original = error.original if isinstance(error, LaterStepFailed) else error
    return isinstance(original, PolicyRefusal)


def reason_of(cause: str) -> str:
    """The first line of the cause, short enough for a commit subject, defanged: a closing
    keyword in a commit message closes its issue once the commit reaches the default branch."""
    first = cause.strip().splitlines()[0] if cause.strip() else "unknown cause"
    return defanged(first if len(first) <= 100 else first[:99] + "…")


def ending_state(error: BaseException) -> RunEnd:
    """``interrupted`` for a Run that was stopped (Ctrl-C, SIGTERM, a daemon stopping), else
    ``failed``: the state a notification gives the Run's end."""
    original = getattr(error, "original", None)
    return (
        RunEnd.INTERRUPTED
        if isinstance(error, Interrupted) or isinstance(original, Interrupted)
        else RunEnd.FAILED
    )


def stopped(error: BaseException) -> bool:
    """Whether the Run ended because it was stopped (Ctrl-C, SIGTERM, a daemon stopping) or its
    model providers were all down, not because something failed that would fail again."""
    original = getattr(error, "original", None)
    return isinstance(error, Interrupted | ProviderUnavailable) or isinstance(
        original, Interrupted | ProviderUnavailable
    )
