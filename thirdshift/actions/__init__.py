"""GitHub Actions: a labelled issue starts a Run on a runner.

``event`` decides from an ``issues`` event payload whether there is a Run to start (pure);
``runner`` speaks the runner's language (log groups, workflow commands, the job summary, step
outputs); ``workflow`` writes the workflow file ``thirdshift actions init`` puts in a
repository.
"""

from thirdshift.actions.event import EventDecision, decide, read_event
from thirdshift.actions.runner import Runner
from thirdshift.actions.workflow import workflow_text

__all__ = ["EventDecision", "Runner", "decide", "read_event", "workflow_text"]
