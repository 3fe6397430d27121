"""The ``Notifier`` a Run and the daemon are given (``thirdshift.runs.ports.Notifier``): it
scrubs a message, sends it to every target, and turns each failed send into a warning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from thirdshift.errors import NotificationFailed
from thirdshift.notify.message import body_of
from thirdshift.notify.targets import Target
from thirdshift.records import Notification
from thirdshift.scrub import Scrubber


class Notifier:
    def __init__(
        self, targets: Sequence[Target], *, scrub: Scrubber, progress: Callable[[str], None]
    ) -> None:
        self._targets = tuple(targets)
        self._scrub = scrub
        self._progress = progress

    @property
    def configured(self) -> bool:
        return bool(self._targets)

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
        clean = self.scrubbed(notification)
        body = body_of(clean)
        what = f"Run {clean.run_id}" if clean.run_id is not None else clean.event
        for target in self._targets:
            try:
                target.send(clean, body)
            except NotificationFailed as problem:
                self._progress(
                    self._scrub(f"warning: could not notify {target.name} of {what}: {problem}")
                )
                continue
            self._progress(self._scrub(f"notified {target.name} of {what} ({clean.state})"))
