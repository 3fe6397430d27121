"""What each session may use of the host, read from the settings (adr/0039). A module of its
own, free of git, so that ``thirdshift config`` can say it on a machine without git."""

from __future__ import annotations

from thirdshift.harnesses.limits import SessionLimits
from thirdshift.settings import Settings


def session_limits(settings: Settings) -> SessionLimits:
    """What each session may use of the host (adr/0039)."""
    return SessionLimits(
        max_processes=settings.session_max_processes,
        memory_mb=settings.session_memory_mb,
        tmpfs_mb=settings.session_tmpfs_mb,
        disk_mb=settings.session_disk_mb,
        max_files=settings.session_max_files,
        disk_check_seconds=settings.session_disk_check_seconds,
    )
