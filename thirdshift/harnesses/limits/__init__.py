"""Session limits (adr/0039): each session's CLI runs in a cgroup of its own, bounded in
processes, memory (tmpfs included) and CPU weight, and watched for the disk it writes.

``groups`` holds the values, the ``SessionGroups`` seam with its scripted and unbounded
adapters, and the causes a Failed run names; ``cgroups`` the real adapters (cgroup v2 and v1)
and the probe that chooses between them; ``watch`` the watcher of a running session.
"""

from thirdshift.harnesses.limits.cgroups import (
    CgroupV1,
    CgroupV2,
    group_name,
    group_owner,
    probe_groups,
)
from thirdshift.harnesses.limits.groups import (
    LimitHit,
    ScriptedGroup,
    ScriptedGroups,
    SessionGroup,
    SessionGroups,
    SessionLimits,
    SessionLimitsError,
    SessionLimitsUnavailable,
    Unbounded,
    limit_cause,
)
from thirdshift.harnesses.limits.watch import LimitWatch, disk_use

__all__ = [
    "CgroupV1",
    "CgroupV2",
    "LimitHit",
    "LimitWatch",
    "ScriptedGroup",
    "ScriptedGroups",
    "SessionGroup",
    "SessionGroups",
    "SessionLimits",
    "SessionLimitsError",
    "SessionLimitsUnavailable",
    "Unbounded",
    "disk_use",
    "group_name",
    "group_owner",
    "limit_cause",
    "probe_groups",
]
