"""What a notification target receives: pure functions of a ``Notification``.

The webhook gets the JSON body (``body_of``), signed like GitHub signs its webhooks: the header
``X-Thirdshift-Signature-256`` carries ``sha256=`` and the hex HMAC-SHA256 of the exact body
bytes with the shared secret (``signature``). Chat and e-mail targets get a title and a plain
text (``text_of``).
"""

from __future__ import annotations

import hashlib
import hmac
import json

from thirdshift.records import Notification
from thirdshift.run_states import RunKind

NOTIFICATION_VERSION = 1
"""The ``version`` of the ``notification`` shape (docs/json.md): the webhook body."""
SIGNATURE_HEADER = "X-Thirdshift-Signature-256"
EVENT_HEADER = "X-Thirdshift-Event"


def body_of(notification: Notification) -> bytes:
    """The JSON body (the ``notification`` shape of docs/json.md): every field of the
    message, keys sorted, UTF-8."""
    document = {
        "type": "notification",
        "version": NOTIFICATION_VERSION,
        "event": notification.event,
        "run_id": notification.run_id,
        "repository": notification.repository,
        # 0 for an Architect run, as documented: it has no issue.
        "issue_number": notification.issue_number or 0,
        "issue_url": notification.issue_url,
        "kind": notification.kind,
        "state": notification.state,
        "cause": notification.cause,
        "pull_request_url": notification.pull_request_url,
        "cost_usd": notification.cost_usd,
        "post_mortem": notification.post_mortem,
        "tickets": list(notification.tickets),
    }
    return json.dumps(document, sort_keys=True, ensure_ascii=False).encode()


def signature(body: bytes, secret: str) -> str:
    """``sha256=<hex HMAC-SHA256 of body with secret>``, the value of ``SIGNATURE_HEADER``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def text_of(notification: Notification) -> tuple[str, str]:
    """(title, body) for chat and e-mail: what happened to which issue, then the details."""
    issue = f"{notification.repository}#{notification.issue_number}"
    if notification.event == "issue.passed_over":
        title = f"thirdshift passed over {issue}"
    elif notification.kind == RunKind.ARCHITECT:  # a Run with no issue: named by its repository
        title = f"thirdshift: Architect run on {notification.repository} {notification.state}"
    else:
        title = f"thirdshift: {issue} {notification.state}"
    lines = []
    if notification.run_id is not None:
        lines.append(f"Run {notification.run_id} ({notification.kind}): {notification.state}")
    if notification.cause:
        lines.append(f"Cause: {notification.cause}")
    lines.append(f"Issue: {notification.issue_url}")
    if notification.pull_request_url:
        lines.append(f"Pull request: {notification.pull_request_url}")
    if notification.cost_usd is not None:
        lines.append(f"Cost: ${notification.cost_usd:.4f}")
    if notification.tickets:
        lines += ["", "Tickets:", *(f"- {line}" for line in notification.tickets)]
    if notification.post_mortem:
        lines += ["", notification.post_mortem]
    return title, "\n".join(lines)
