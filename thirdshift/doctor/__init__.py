"""``thirdshift doctor``: is this machine ready for a Run? The checks (``checks``: pure
functions behind a private Outside seam) and their real Outside (``outside``), which the
composition root builds."""

from thirdshift.doctor.checks import Access, Check, Database, diagnose, failed
from thirdshift.doctor.outside import SystemOutside

__all__ = ["Access", "Check", "Database", "SystemOutside", "diagnose", "failed"]
