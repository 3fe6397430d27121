"""The daemon: it watches repositories for Ready issues, claims each exactly once, runs them
within limits, and takes over the Runs of daemons that died.

``ready`` holds the rules (pure functions: which issue is Ready, which is passed over and why,
in what order); ``poll`` applies them to one repository through the ``DaemonGitHub`` seam and
the store, and decides the pickups, sweeps and Rescues; ``daemon`` executes Runs side by side
and drives the polls with APScheduler; ``activity`` writes the Activity log; ``pauses`` keeps
which Harness's provider is down, until when.
"""

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.daemon import Daemon, RunStarter
from thirdshift.daemon.pauses import ProviderPauses
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.ready import ReadyRules

__all__ = [
    "ActivityLog",
    "Daemon",
    "Pickup",
    "ProviderPauses",
    "ReadyRules",
    "RepositoryPoll",
    "RunStarter",
]
