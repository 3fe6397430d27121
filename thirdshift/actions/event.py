"""Which ``issues`` events start a Run: the rules, as pure functions of the payload.

Only a ``labeled`` action whose label is the Ready label, on an issue (not a pull request),
starts one; whether the labeller (the payload's ``sender``) may ask for it is decided with
GitHub's answer about their permission, as the daemon decides it. Anything else is a one-line
reason and exit 0: a workflow that runs on every label must not fail on the others.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from thirdshift.errors import UsageError


@dataclass(frozen=True)
class EventDecision:
    """The Run an event asks for (``owner``/``name``/``number``, labelled by ``sender``), or
    None with ``why`` not."""

    why: str
    owner: str = ""
    name: str = ""
    number: int = 0
    sender: str = ""
    html_url: str = ""
    labelled: bool = True  # False: asked for by hand (workflow_dispatch), no label involved
    # Anyone may download a public repository's artifacts: its Session logs are not uploaded.
    # Public unless the payload says private (an internal repository is private too).
    public: bool = True

    @property
    def runs(self) -> bool:
        return self.number > 0


def read_event(text: str, where: str) -> dict[str, Any]:
    """The payload in ``text`` (the file ``where``), or a UsageError saying what is expected."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{where} is not JSON ({error.msg}, line {error.lineno}); --event takes the file "
            "GitHub Actions names in GITHUB_EVENT_PATH"
        ) from error
    if not isinstance(payload, dict):
        raise UsageError(f"{where} is not a GitHub event payload (an object is expected)")
    return payload


def decide(
    payload: dict[str, Any], ready_label: str, event_name: str | None = None
) -> EventDecision:
    """Whether ``payload`` asks for a Run, by its shape alone: an ``issues`` event that added
    the Ready label to an issue, or a ``workflow_dispatch`` naming an issue (``inputs.issue``:
    someone who may run workflows asked for that issue by hand)."""
    repository = payload.get("repository")
    sender = payload.get("sender")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    login = sender.get("login") if isinstance(sender, dict) else None
    if not isinstance(full_name, str) or full_name.count("/") != 1:
        return EventDecision("the event names no repository")
    if not isinstance(login, str):
        return EventDecision("the event names no sender")
    owner, _, repo = full_name.partition("/")
    public = not (isinstance(repository, dict) and repository.get("private") is True)
    if event_name not in (None, "issues", "workflow_dispatch"):
        return EventDecision(f"the event is {event_name}; thirdshift runs on issues events")
    inputs = payload.get("inputs")
    dispatched = event_name == "workflow_dispatch" or (
        event_name is None and isinstance(inputs, dict) and "issue" in inputs
    )
    if dispatched:
        if not isinstance(inputs, dict) or "issue" not in inputs:
            return EventDecision("the workflow was started without an issue input")
        number = _number(inputs.get("issue"))
        if number is None:
            return EventDecision(f"the input issue is {inputs.get('issue')!r}, not a number")
        return EventDecision("", owner, repo, number, login, labelled=False, public=public)
    action = payload.get("action")
    issue = payload.get("issue")
    label = payload.get("label")
    if not isinstance(issue, dict):
        return EventDecision("the event is not about an issue; thirdshift runs on issues events")
    if action != "labeled":
        return EventDecision(f"the event's action is {action!r}; only 'labeled' starts a Run")
    name = label.get("name") if isinstance(label, dict) else None
    if not isinstance(name, str):
        return EventDecision("the event names no label")
    if name.lower() != ready_label.lower():
        return EventDecision(f"the label added is {name!r}, not {ready_label!r}")
    if issue.get("pull_request") is not None:
        return EventDecision(f"#{issue.get('number')} is a pull request, not an issue")
    if issue.get("state") not in (None, "open"):
        return EventDecision(f"issue #{issue.get('number')} is {issue.get('state')}")
    number = _number(issue.get("number"))
    if number is None:
        return EventDecision("the event names no issue number")
    html_url = str(issue.get("html_url") or "")
    return EventDecision("", owner, repo, number, login, html_url, public=public)


def _number(value: object) -> int | None:
    """A positive issue number from JSON, or a string of plain digits as workflow inputs are
    (no sign, space or leading zero: the concurrency group is keyed by the text as given)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and re.fullmatch(r"[1-9][0-9]{0,9}", value):
        return int(value)
    return value if isinstance(value, int) and 0 < value < 10**10 else None
