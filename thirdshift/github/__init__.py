"""The GitHub adapter: the only package that imports PyGithub.

``GitHub`` answers with the frozen records of ``thirdshift.records`` and raises the
``GitHubError`` tree of ``thirdshift.errors``; retries, rate-limit waits and the check before a
repeated write live in ``requests``, conversions from PyGithub objects in ``convert``, the ETags
of repeated reads and the request counts in ``conditional``, the pace kept under GitHub's
secondary limits in ``pacing``, PyGithub's own log lines in ``library_log``. A Run reaches it
only through the ``runs.ports.GitHubPort`` seam; the composition root builds it.
"""

from thirdshift.github.adapter import ROLES, GitHub
from thirdshift.github.conditional import RequestCounts
from thirdshift.github.library_log import route_library_log
from thirdshift.github.pacing import PaceBudget, Pacer

__all__ = ["ROLES", "GitHub", "PaceBudget", "Pacer", "RequestCounts", "route_library_log"]
