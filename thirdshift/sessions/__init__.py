"""Sessions: the Resume rules (seed 001) and the Context preambles, as pure rules behind the
private Outside seam.

``rules`` holds ``Sessions`` and its errors, ``preamble`` the resume brief and the follow-up
preamble. The real Outside, which starts a Harness CLI and records the Session in the store,
is ``thirdshift.sessions.cli_outside`` (with ``live_session``, what a session does while its CLI
runs, and ``sealed_space``, where it runs); ``cli_sessions`` builds one for each Harness of a
Run from the frozen values of ``cli_parts`` and ``sealed_space``. Only the composition root
imports these, so nothing that imports this package's face pulls in a Harness adapter or the
store.
"""

from thirdshift.sessions.preamble import (
    EVENTS_IN_RESUME,
    before_prompt,
    count_tokens,
    follow_up_preamble,
    resume_brief,
)
from thirdshift.sessions.rules import (
    BudgetReached,
    LaterStepFailed,
    ResumeUnknown,
    SessionEnding,
    SessionFailed,
    SessionInterrupted,
    Sessions,
)

__all__ = [
    "EVENTS_IN_RESUME",
    "BudgetReached",
    "LaterStepFailed",
    "ResumeUnknown",
    "SessionEnding",
    "SessionFailed",
    "SessionInterrupted",
    "Sessions",
    "before_prompt",
    "count_tokens",
    "follow_up_preamble",
    "resume_brief",
]
