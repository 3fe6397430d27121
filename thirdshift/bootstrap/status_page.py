"""A daemon's status page (adr/0019): where it is served, the token it asks for (one made for
this process when none is set), the webhook deliveries it takes (adr/0046), and the server
running while the daemon does."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pydantic import SecretStr

from thirdshift.daemon import ActivityLog, Daemon
from thirdshift.errors import ConfigError
from thirdshift.settings import Settings
from thirdshift.web import (
    ChartSource,
    PageSource,
    WebhookDelivery,
    WebhookInbox,
    wakes_a_poll,
)
from thirdshift.web.server import is_loopback, is_wildcard, own_host_names, parse_address

MIN_PAGE_TOKEN = 16
"""The status page's token is a password on the network: a short one is guessed (and the
scrubber ignores secrets shorter than 8 characters)."""


def page_address(settings: Settings, http: str | None) -> tuple[str, int] | None:
    """Where the status page is served (None: nowhere); a ConfigError for a page beyond
    loopback without a token, or a token too short."""
    configured = settings.http_token.get_secret_value() if settings.http_token else None
    address = parse_address(http) if http else None
    if address is not None and not is_loopback(address[0]) and not configured:
        raise ConfigError(
            f"--http {http}: beyond loopback the status page needs a token; set "
            "THIRDSHIFT_HTTP_TOKEN (or http_token in the config file), or bind 127.0.0.1"
        )
    if configured is not None and len(configured) < MIN_PAGE_TOKEN:
        raise ConfigError(
            f"http_token is shorter than {MIN_PAGE_TOKEN} characters; use a long random one "
            "(for example: python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    if secret is not None and len(secret) < MIN_PAGE_TOKEN:
        raise ConfigError(
            f"webhook_secret is shorter than {MIN_PAGE_TOKEN} characters; use a long random one "
            "and give GitHub the same (for example: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return address


def webhook_inbox(settings: Settings, daemon: Daemon, activity: ActivityLog) -> WebhookInbox | None:
    """Where ``daemon`` takes GitHub's webhook deliveries (None without ``webhook_secret``):
    each signed one that is news wakes the poll of its repository, each refusal is a line in
    the Activity log."""
    if settings.webhook_secret is None:
        return None

    def deliver(delivery: WebhookDelivery) -> None:
        why = f"webhook {delivery.what} (delivery {delivery.id})"
        if delivery.repository is not None and wakes_a_poll(delivery):
            daemon.wake(delivery.repository, why)
        elif delivery.event == "ping":
            activity.line("webhook", f"{why}: deliveries reach this daemon")

    return WebhookInbox(
        settings.webhook_secret.get_secret_value(),
        deliver=deliver,
        refused=lambda line: activity.line("webhook", line),
    )


def with_page_token(settings: Settings, *, served: bool) -> tuple[Settings, str | None]:
    """The settings a daemon runs with, and the token made for its status page (None when
    none was made). A daemon's agents run untrusted code on this machine, and loopback keeps
    nothing from them: a served page asks for a token, ``http_token`` or, when none is set, a
    random one made for this process. Made into ``http_token``, it is a secret of the settings,
    so every scrubber built from them knows it; it is in no environment, file or database."""
    if not served or settings.http_token is not None:
        return settings, None
    made = secrets.token_urlsafe(32)
    return settings.model_copy(update={"http_token": SecretStr(made)}), made


@contextmanager
def status_page(
    settings: Settings,
    address: tuple[str, int] | None,
    source: Callable[[], PageSource],
    made_token: str | None,
    *,
    inbox: WebhookInbox | None = None,
    charts: ChartSource | None = None,
    say: Callable[[str], None],
    progress: Callable[[str], None],
) -> Iterator[None]:
    """The status page of ``source`` served at ``address`` (nowhere when None) while the
    daemon runs; its address said on ``say``, or with the made token on ``progress``."""
    if address is None:
        if inbox is not None:
            say(
                "warning: webhook_secret is set but the daemon serves no HTTP, so no delivery "
                "can reach it; pass --http HOST:PORT (the polls go on meanwhile)"
            )
        yield
        return
    token = settings.http_token
    own = own_host_names() if is_wildcard(address[0]) else ()
    from thirdshift.web import StatusServer, make_app  # only where a page is served

    app = make_app(
        source(),
        token=token.get_secret_value() if token else "",
        host=address[0],
        port=address[1],
        also_hosts=[*own, *settings.http_hosts],
        inbox=inbox,
        charts=charts,
    )
    server = StatusServer(app, *address)
    server.start()
    if made_token is None:
        say(f"status page at {server.url} (it asks for http_token)")
    else:
        # The one place the made token is shown, so unscrubbed: the operator's terminal.
        progress(f"status page at {server.url}?token={made_token}")
    if inbox is not None:
        say(f"webhook deliveries at {server.url}webhook (signed with webhook_secret)")
    try:
        yield
    finally:
        server.stop()
