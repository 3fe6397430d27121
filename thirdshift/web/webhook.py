"""GitHub webhook deliveries, checked before anything is believed of them.

A delivery is a stranger's request until its ``X-Hub-Signature-256`` proves it was signed with
``webhook_secret``; even then it only says "look at this repository now": the daemon polls the
repository as it always does and never acts on the payload's word (adr/0046). The rules here are
pure (``check_signature``, ``read_delivery``, ``wakes_a_poll``); ``WebhookInbox`` adds the state:
the delivery ids and bodies already seen, so a replayed delivery is refused, and when each kind
of refusal was last said.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError

MAX_DELIVERY_BYTES = 5 * 1024 * 1024
"""The longest body read. GitHub caps a payload at 25 MB, but the events that wake a poll are a
few kilobytes; a stranger's long bodies would each cost the daemon memory before the signature
can be checked. A longer one is refused unread (the backstop poll sees what it was about)."""

BODY_SECONDS = 10.0
"""How long a body may take to arrive: GitHub gives up on a delivery after about 10 s, and a
slow sender would otherwise hold a connection of the daemon's for as long as it likes."""

REFUSALS_SAID_EVERY = 300.0
"""A refusal of one kind is said at most once in this many seconds, with how many were not
said: strangers' requests must not fill the Activity log (and the database under it)."""

REMEMBERED_DELIVERIES = 10_000
"""Delivery ids and body digests kept to refuse a replay: far more than GitHub sends while one
is still fresh."""

WAKING_ACTIONS: Mapping[str, frozenset[str] | None] = {
    "issues": frozenset({"labeled", "unlabeled", "edited", "closed", "reopened"}),
    "issue_comment": None,
    "pull_request_review": None,
    "pull_request_review_comment": None,
    "check_run": frozenset({"completed"}),
    "check_suite": frozenset({"completed"}),
    "sub_issues": None,
    "ping": None,
}
"""The events (and, where it matters, their actions) that make the daemon poll a repository
now; None: every action of the event."""


class DeliveryRefused(ThirdshiftError):
    """A delivery thirdshift does not believe; ``status`` is the HTTP answer it gets."""

    def __init__(self, status: int, reason: str, kind: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.kind = kind or reason
        """What the refusal is, without its particulars (a replay's id): what is counted."""


@dataclass(frozen=True)
class WebhookDelivery:
    """A signed delivery: its id, event and action, and the repository it is about
    (``owner/name``; None for an organisation's or an App's ``ping``)."""

    id: str
    event: str
    action: str | None
    repository: str | None

    @property
    def what(self) -> str:
        return f"{self.event}.{self.action}" if self.action else self.event


def check_signature(secret: bytes, body: bytes, header: str | None) -> None:
    """Nothing when ``header`` is ``sha256=`` and the HMAC-SHA256 of ``body`` under ``secret``;
    else DeliveryRefused (401). Compared in constant time."""
    if not header:
        raise DeliveryRefused(401, "unsigned (no X-Hub-Signature-256 header)")
    scheme, _, given = header.partition("=")
    if scheme != "sha256" or not given:
        raise DeliveryRefused(401, "signed in a form other than sha256=<hex>")
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.strip().lower().encode(), expected.encode()):
        raise DeliveryRefused(401, "wrongly signed: its signature does not match webhook_secret")


def read_delivery(headers: Mapping[str, str], body: bytes) -> WebhookDelivery:
    """The delivery a signed request holds; DeliveryRefused (400) when it names no id or
    event, or its body is not a JSON object."""
    delivery_id = (headers.get("x-github-delivery") or "").strip()
    event = (headers.get("x-github-event") or "").strip()
    if not delivery_id or len(delivery_id) > 100:
        raise DeliveryRefused(400, "no usable X-GitHub-Delivery header")
    if not event or len(event) > 100:
        raise DeliveryRefused(400, "no usable X-GitHub-Event header")
    try:
        payload = json.loads(body)
    except ValueError as error:
        raise DeliveryRefused(400, "its body is not JSON (send application/json)") from error
    if not isinstance(payload, dict):
        raise DeliveryRefused(400, "its body is not a JSON object")
    action = payload.get("action")
    repository = payload.get("repository")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    return WebhookDelivery(
        id=delivery_id,
        event=event,
        action=action if isinstance(action, str) else None,
        repository=full_name if isinstance(full_name, str) and "/" in full_name else None,
    )


def wakes_a_poll(delivery: WebhookDelivery) -> bool:
    """Whether the delivery is news the daemon's poll of its repository should see now."""
    if delivery.event not in WAKING_ACTIONS:
        return False
    actions = WAKING_ACTIONS[delivery.event]
    return actions is None or delivery.action in actions


class WebhookInbox:
    """Checks each request as a delivery (signature first, then its shape, then that its id is
    new) and hands the ones that pass to ``deliver``; ``refused`` hears each refusal's reason.
    Both are called on the web server's thread and must return at once: GitHub gives up on a
    delivery after about 10 s."""

    def __init__(
        self,
        secret: str,
        *,
        deliver: Callable[[WebhookDelivery], None],
        refused: Callable[[str], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not secret:
            raise ValueError("a webhook inbox needs a secret")
        self._secret = secret.encode()
        self._deliver = deliver
        self._refused = refused
        self._monotonic = monotonic
        self._seen: OrderedDict[str, None] = OrderedDict()
        # kind -> (when it was last said, how many since were not)
        self._said: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def receive(self, headers: Mapping[str, str], body: bytes) -> WebhookDelivery:
        """The delivery, handed on; DeliveryRefused (said on ``refused``) when it is not one."""
        try:
            check_signature(self._secret, body, headers.get("x-hub-signature-256"))
            delivery = read_delivery(headers, body)
            # The signature covers the body only: a signed body sent again under a new id is
            # a replay too.
            self._remember(delivery.id, hashlib.sha256(body).hexdigest())
        except DeliveryRefused as refusal:
            self.refuse(refusal)
            raise
        self._deliver(delivery)
        return delivery

    def refuse(self, refusal: DeliveryRefused) -> None:
        """Say the refusal, unless one of its kind was said less than REFUSALS_SAID_EVERY
        ago: then it is counted, and said with the next one that is."""
        now = self._monotonic()
        with self._lock:
            last, unsaid = self._said.get(refusal.kind, (None, 0))
            if last is not None and now - last < REFUSALS_SAID_EVERY:
                self._said[refusal.kind] = (last, unsaid + 1)
                return
            self._said[refusal.kind] = (now, 0)
        more = f" ({unsaid} more like it were not said)" if unsaid else ""
        self._refused(f"a webhook delivery was refused: {refusal.reason}{more}")

    def _remember(self, delivery_id: str, digest: str) -> None:
        with self._lock:
            for key, what in ((f"id:{delivery_id}", "its id"), (f"body:{digest}", "its body")):
                if key in self._seen:
                    raise DeliveryRefused(
                        400,
                        f"a replay: {what} came with an earlier delivery (this one says it is "
                        f"{delivery_id})",
                        "a replay",
                    )
            self._seen[f"id:{delivery_id}"] = None
            self._seen[f"body:{digest}"] = None
            while len(self._seen) > 2 * REMEMBERED_DELIVERIES:
                self._seen.popitem(last=False)
