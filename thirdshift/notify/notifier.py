"""``TargetNotifier``: the Notifier a Run and the daemon are given (the seam is
``thirdshift.runs.ports.Notifier``): it scrubs a message, sends it to every target, and turns
each failed send into a warning."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from thirdshift.errors import NotificationFailed
from thirdshift.notify.message import body_of
from thirdshift.notify.targets import SEND_TIMEOUT_SECONDS, Target
from thirdshift.records import Notification
from thirdshift.scrub import Scrubber


class TargetNotifier:
    def __init__(
        self,
        targets: Sequence[Target],
        *,
        scrub: Scrubber,
        progress: Callable[[str], None],
        deadline_seconds: float = SEND_TIMEOUT_SECONDS + 5,
    ) -> None:
        self._deadline = deadline_seconds
        self._targets = tuple(targets)
        self._scrub = scrub
        self._progress = progress

    @property
    def configured(self) -> bool:
        return bool(self._targets)

    @property
    def names(self) -> tuple[str, ...]:
        """Where it sends, each named without its secrets."""
        return tuple(target.name for target in self._targets)

    def scrubbed(self, notification: Notification) -> Notification:
        """``notification`` with every text scrubbed (a cause or a post-mortem may quote what
        the agent printed)."""
        scrub = self._scrub

        def clean(text: str | None) -> str | None:
            return None if text is None else scrub(text)

        return replace(
            notification,
            repository=scrub(notification.repository),
            issue_url=scrub(notification.issue_url),
            cause=clean(notification.cause),
            pull_request_url=clean(notification.pull_request_url),
            post_mortem=clean(notification.post_mortem),
        )

    def notify(self, notification: Notification) -> None:
        """Send to every target; never raises, and never waits much longer than
        ``deadline_seconds`` per target (a receiver that trickles its answer is left behind:
        the Run, holding its Lease, or the poll must not wait on it)."""
        clean = self.scrubbed(notification)
        body = body_of(clean)
        what = f"Run {clean.run_id}" if clean.run_id is not None else clean.event
        for target in self._targets:
            problem = self._send(target, clean, body)
            if problem is not None:
                self._progress(
                    self._scrub(f"warning: could not notify {target.name} of {what}: {problem}")
                )
                continue
            self._progress(self._scrub(f"notified {target.name} of {what} ({clean.state})"))

    def _send(self, target: Target, notification: Notification, body: bytes) -> str | None:
        """Why the send failed, or None. The send runs in a thread of its own, joined with a
        deadline: urllib's timeout bounds each read, not the whole answer."""
        outcome: list[str | None] = []

        def send() -> None:
            try:
                target.send(notification, body)
            except NotificationFailed as problem:
                outcome.append(str(problem))
            except Exception as error:  # a target's bug or a malformed answer: still a warning
                outcome.append(f"failed ({error.__class__.__name__})")
            else:
                outcome.append(None)

        worker = threading.Thread(target=send, name=f"notify {target.name}", daemon=True)
        worker.start()
        worker.join(self._deadline)
        if not outcome:
            return f"no answer within {self._deadline:g}s; left behind"
        return outcome[0]
