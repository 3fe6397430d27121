"""The daemon's own share of the machine: it raises its open-file limit before it starts.

A daemon holds, for every session it runs, the session's pipes, its Session log and its egress
proxy's connections (up to ``MAX_TUNNELS`` of them, two descriptors each), besides its database,
git and GitHub connections. systemd's default soft limit (1,024) is far below what the hard limit
allows (often 524,288), and a process may raise its soft limit up to its hard one by itself.
"""

from __future__ import annotations

import resource
from pathlib import Path

ENOUGH_DESCRIPTORS = 4096
"""Below this, a daemon running a few sessions at once may be unable to open a file."""
_NR_OPEN = Path("/proc/sys/fs/nr_open")
"""The kernel's ceiling on a process's open files: the soft limit when the hard one is
unlimited."""


def raise_descriptor_limit() -> str | None:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit. None when the limit is now at
    least ``ENOUGH_DESCRIPTORS``; else a warning line naming the limit it stays at and the fix."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = hard
    if hard == resource.RLIM_INFINITY:
        try:
            ceiling = int(_NR_OPEN.read_text())
        except (OSError, ValueError):
            ceiling = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (OSError, ValueError):
            pass  # said below, with the limit it keeps
    if soft == resource.RLIM_INFINITY or soft >= ENOUGH_DESCRIPTORS:
        return None
    return (
        f"warning: the daemon may open only {soft} files at once (its hard limit is "
        f"{'unlimited' if hard == resource.RLIM_INFINITY else hard}); a few sessions at once may "
        "exhaust them: raise the limit (LimitNOFILE=65536 in the systemd unit, or ulimit -n "
        "65536 in its shell)"
    )
