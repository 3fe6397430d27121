"""The daemon: it watches repositories for Ready issues, claims each exactly once, runs them
within limits, and Rescues the Runs of daemons that died.

``ready`` holds the rules (pure functions: which issue is Ready, which is passed over and why,
in what order); ``poll`` applies them to one repository through the ``DaemonGitHub`` seam and
the store, and decides the pickups, sweeps and Rescues; ``daemon`` executes Runs side by side
and drives the polls with APScheduler, starting each through the ``RunStarter`` seam and
following it (``follow``) to its end (``ends``); ``schedule`` is the Architect schedule;
``snapshot`` what ``thirdshift status`` shows of a daemon, ``state`` its published shape;
``activity`` writes the Activity log; ``pauses`` keeps which Harness's provider is down, until
when.
"""

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.daemon import Daemon
from thirdshift.daemon.parts import DaemonParts, Limits, PollHooks, PollParts, WatchTimes
from thirdshift.daemon.pauses import ProviderPauses
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.ports import RunStarter, RunWatch
from thirdshift.daemon.ready import ReadyRules
from thirdshift.daemon.schedule import NextArchitectRun
from thirdshift.daemon.snapshot import StateSources

__all__ = [
    "ActivityLog",
    "Daemon",
    "DaemonParts",
    "Limits",
    "NextArchitectRun",
    "Pickup",
    "PollHooks",
    "PollParts",
    "ProviderPauses",
    "ReadyRules",
    "RepositoryPoll",
    "RunStarter",
    "RunWatch",
    "StateSources",
    "WatchTimes",
]
