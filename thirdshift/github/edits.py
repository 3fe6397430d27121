"""Who edited an issue's text and when, from the two places GitHub keeps it (ADR 0024).

GitHub's REST issue has no editor. A title change is a ``renamed`` event of the issue's events
(REST, asked conditionally, with the labelling); a body edit is in GraphQL's
``Issue.userContentEdits`` (and ``Issue.lastEditedAt`` / ``Issue.editor`` for the last one).
Pure conversions of GitHub's answers; the requests are the adapter's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from thirdshift.records import Labelling, TextEdit

# The newest 100 body edits: older ones are folded into one of unknown editor at the oldest
# one's time (they are older still).
ISSUE_EDITS_QUERY = """query ($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    issue(number: $number) {
      createdAt
      lastEditedAt
      editor { login }
      userContentEdits(last: 100) { totalCount nodes { editedAt editor { login } } }
    }
  }
}"""


def when(raw: Any) -> datetime:
    """A GitHub timestamp (``2026-12-10T09:00:00Z``)."""
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))


def _login(actor: Any) -> str | None:
    login = actor.get("login") if isinstance(actor, dict) else None
    return str(login) if login else None


def labelling_of(events: Iterable[Any], label: str) -> Labelling | None:
    """The last ``labeled`` event of ``label`` (any case) among an issue's REST events."""
    wanted = label.lower()
    labelled = [
        event
        for event in events
        if event.get("event") == "labeled"
        and str((event.get("label") or {}).get("name", "")).lower() == wanted
    ]
    if not labelled:
        return None
    # Events come oldest first; ordering by time and id does not rely on it.
    labelled.sort(key=lambda event: (str(event.get("created_at")), event["id"]))
    adders = tuple((_login(event.get("actor")), when(event["created_at"])) for event in labelled)
    return Labelling(*adders[-1], adders=adders)


def renames_of(events: Iterable[Any]) -> tuple[TextEdit, ...]:
    """The title edits among an issue's REST events (``renamed``), oldest first."""
    found = [
        TextEdit("title", _login(event.get("actor")), when(event["created_at"]))
        for event in events
        if event.get("event") == "renamed"
    ]
    return tuple(sorted(found, key=lambda edit: edit.at))


def body_edits_of(data: Any) -> tuple[TextEdit, ...]:
    """The body edits in the answer to ``ISSUE_EDITS_QUERY``, oldest first. The first version
    GitHub lists once a body is edited is the opening, no edit; the last edit is also read
    from ``lastEditedAt``/``editor``, so a lagging history still shows it."""
    issue = ((data or {}).get("data") or {}).get("repository", {}).get("issue") or {}
    created = when(issue["createdAt"]) if issue.get("createdAt") else None
    history = issue.get("userContentEdits") or {}
    nodes = [node for node in history.get("nodes") or [] if node and node.get("editedAt")]
    nodes.sort(key=lambda node: when(node["editedAt"]))
    complete = int(history.get("totalCount") or 0) <= len(nodes)
    if complete and nodes and created is not None and when(nodes[0]["editedAt"]) == created:
        nodes = nodes[1:]  # the opening version: what was labelled, if nothing came after
    edits = {(when(node["editedAt"]), _login(node.get("editor"))) for node in nodes}
    if issue.get("lastEditedAt"):
        edits.add((when(issue["lastEditedAt"]), _login(issue.get("editor"))))
    if nodes and not complete:
        # Edits left out of the answer: none of them can be shown to be anyone's.
        oldest = min(when(node["editedAt"]) for node in nodes)
        edits.add((oldest, None))
    return tuple(TextEdit("body", editor, at) for at, editor in sorted(edits, key=_order))


def _order(edit: tuple[datetime, str | None]) -> tuple[datetime, str]:
    return edit[0], edit[1] or ""
