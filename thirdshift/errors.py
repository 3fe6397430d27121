"""The one exception root and its short tree.

Every error thirdshift raises on purpose derives from ThirdshiftError, carries a message that
names the object at fault and the fix, and maps to an exit status in the CLI. Third-party
exceptions are translated where they are caught (``raise ... from exc``).
"""

from __future__ import annotations

from datetime import datetime


class ThirdshiftError(Exception):
    """Root of every error thirdshift raises on purpose. Exit status 1 unless a subclass says."""

    exit_code = 1


class UsageError(ThirdshiftError):
    """The command line itself is wrong (an unknown flag, a malformed Issue URL). Exit 2."""

    exit_code = 2


class ConfigError(ThirdshiftError):
    """The configuration file or a ``THIRDSHIFT_*`` variable is unknown, malformed or of a wrong
    type. The message names the file (or variable) and the key."""


class StoreError(ThirdshiftError):
    """The database cannot be opened, migrated or written; the message names the URL, with any
    password removed."""


class SandboxError(ThirdshiftError):
    """A sandbox server (the GitHub stand-in or the scripted model server) cannot start, or was
    given a scenario it cannot play (a bad script, an unknown repository)."""


class NotRecorded(ThirdshiftError):
    """``thirdshift show`` or ``logs`` was asked for a Run, a Session kind or a Session log the
    database (or this machine) does not have; the message names it and where to look."""


class NotificationFailed(ThirdshiftError):
    """A notification target did not take a message (refused, unreachable, timed out). Always
    reported as a warning naming the target: it never fails a Run."""


class Interrupted(ThirdshiftError):
    """thirdshift was asked to stop (Ctrl-C or SIGTERM) while waiting; the Run ends as a Failed
    run whose cause is "interrupted"."""


class LeaseLost(ThirdshiftError):
    """The Run's Lease passed to another Run (it expired while this one was paused, or could
    not be renewed): the Run stops and changes nothing more on GitHub or on origin."""


class NotClaimed(ThirdshiftError):
    """The Run did not claim the issue: another Run holds its Lease, or (for a daemon) the
    issue stopped being Ready or was taken over before the Lease was won. Nothing changed
    anywhere. Exit status 3, so a script or the daemon can tell it from a failure."""

    exit_code = 3


class GitError(ThirdshiftError):
    """A git command in the managed clone or a Worktree failed or timed out. The message names
    the command (never a credential), the clone or Worktree, and the fix."""


class PushRejected(GitError):
    """The remote refused a push (a non-fast-forward update, or a rule on the remote). thirdshift
    never forces: the caller fetches and merges, or records a Failed run."""


class GitHubError(ThirdshiftError):
    """A GitHub request failed for good. ``status`` is GitHub's HTTP status, or None when GitHub
    could not be reached; ``detail`` is GitHub's own message, when it gave one. The message names
    the request and the fix, never the token."""

    def __init__(self, message: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class NotFound(GitHubError):
    """GitHub answered 404: the object does not exist, or the token cannot see it."""


class MergeRefused(GitHubError):
    """GitHub refused a merge (405, 409 or 422); ``status`` and ``detail`` say why, as GitHub
    put it (a moved head, a failing required check, a draft, a conflict)."""


class RateLimited(GitHubError):
    """GitHub's rate limit did not reset within the wait thirdshift allows; ``resets_at`` is
    when GitHub said it resets (None when it did not say)."""

    def __init__(
        self, message: str, status: int | None, detail: str, resets_at: datetime | None
    ) -> None:
        super().__init__(message, status, detail)
        self.resets_at = resets_at


class HarnessMissing(ThirdshiftError):
    """A Harness a daemon or the demo may run is not installed where thirdshift looks for it.
    Found before anything starts, so nothing waits for a CLI that is not there. Exit 2."""

    exit_code = 2
