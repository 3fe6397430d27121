"""The notification targets: the seam ``Target`` with its real adapters (``WebhookTarget``,
``AppriseTarget``) and a scripted one (``ScriptedTarget``) for tests.

A target's ``name`` says where it sends without its secrets (a webhook's scheme, host and port;
an Apprise URL's service and its place in ``notify_urls``), because it appears in warnings.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

from thirdshift.errors import ConfigError, NotificationFailed
from thirdshift.notify.message import EVENT_HEADER, SIGNATURE_HEADER, signature, text_of
from thirdshift.records import Notification

SEND_TIMEOUT_SECONDS = 10.0


class Target(Protocol):
    """One place messages go."""

    @property
    def name(self) -> str:
        """Where it sends, with no secret in it."""
        ...

    def send(self, notification: Notification, body: bytes) -> None:
        """Deliver one message (``body`` is its JSON) or raise ``NotificationFailed`` saying
        why, with no secret in it. Returns within about ``SEND_TIMEOUT_SECONDS``."""
        ...


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirected POST would be re-sent as a GET without its body, or to a host the secret's
    # owner never named: a redirect is a failed send.
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class WebhookTarget:
    """POSTs the JSON body to ``url`` with its HMAC-SHA256 signature; any answer but 2xx fails."""

    def __init__(self, url: str, secret: str, *, timeout: float = SEND_TIMEOUT_SECONDS) -> None:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise ConfigError(
                "notify_webhook_url must be an http:// or https:// URL with a host (and a port "
                "from 1 to 65535, if any)"
            )
        if not secret:
            raise ConfigError(
                "notify_webhook_url is set without notify_webhook_secret; set a shared secret "
                "so the receiver can check that a message comes from thirdshift"
            )
        self._url = url
        self._secret = secret
        self._timeout = timeout
        shown_port = f":{port}" if port else ""
        self._name = f"webhook {parts.scheme}://{parts.hostname}{shown_port}"
        self._opener = urllib.request.build_opener(_NoRedirects)

    @property
    def name(self) -> str:
        return self._name

    def send(self, notification: Notification, body: bytes) -> None:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked to be http(s) above
            self._url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "thirdshift",
                EVENT_HEADER: notification.event,
                SIGNATURE_HEADER: signature(body, self._secret),
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            raise NotificationFailed(f"answered {error.code}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise NotificationFailed(f"could not be reached: {reason}") from None
        if not 200 <= status < 300:
            raise NotificationFailed(f"answered {status}")


class AppriseTarget:
    """One Apprise URL (``slack://...``, ``mailto://...``): the title and text of the message.
    Apprise's own log lines are captured, never printed: they may quote the URL."""

    def __init__(self, url: str, index: int) -> None:
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        self._name = f"{scheme} (notify_urls entry {index})"
        self._url = url
        import apprise  # only where an Apprise URL is set: it costs every process 80 ms

        with apprise.LogCapture(level=apprise.logging.ERROR):  # type: ignore[no-untyped-call]
            known = apprise.Apprise().add(url)
        if not known:
            raise ConfigError(
                f"notify_urls entry {index} ({scheme}://) is not a URL Apprise can send to; "
                "see Apprise's list of services for the form it takes"
            )

    @property
    def name(self) -> str:
        return self._name

    def send(self, notification: Notification, body: bytes) -> None:
        import apprise

        title, text = text_of(notification)
        # LogCapture is untyped in Apprise 2.2; it returns a StringIO.
        with apprise.LogCapture(level=apprise.logging.WARNING) as captured:  # type: ignore[no-untyped-call]
            try:
                sender = apprise.Apprise()
                sender.add(self._url)
                # Plain text, always: the message quotes what an agent printed, which must
                # not become HTML in an e-mail or a mention in a chat.
                sent = bool(
                    sender.notify(
                        body=_no_mentions(text),
                        title=_no_mentions(title),
                        body_format=apprise.NotifyFormat.TEXT,
                    )
                )
            except Exception as error:
                raise NotificationFailed(f"Apprise failed ({error.__class__.__name__})") from None
            said = captured.getvalue() if hasattr(captured, "getvalue") else ""
        if not sent:
            # Apprise's last line says why; the Notifier scrubs the warning.
            last = said.strip().splitlines()[-1].split(" - ", 2)[-1] if said.strip() else ""
            raise NotificationFailed("not sent" + (f" ({last})" if last else ""))


_MENTIONS = re.compile(r"@(everyone|here|channel)\b|<!(channel|here|everyone)[^>]*>", re.I)


def _no_mentions(text: str) -> str:
    """``text`` with chat-wide mentions broken (a zero-width space after the ``@``/``<``)."""
    return _MENTIONS.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)


class ScriptedTarget:
    """A target for tests: records every message and fails as scripted (``fail_next``)."""

    def __init__(self, name: str = "scripted") -> None:
        self._name = name
        self.sent: list[tuple[Notification, bytes]] = []
        self._failures: deque[str] = deque()

    @property
    def name(self) -> str:
        return self._name

    def fail_next(self, reasons: Iterable[str]) -> None:
        """The next sends fail, one per reason, in order."""
        self._failures.extend(reasons)

    def send(self, notification: Notification, body: bytes) -> None:
        if self._failures:
            raise NotificationFailed(self._failures.popleft())
        self.sent.append((notification, body))
