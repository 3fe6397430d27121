"""The status page: ``thirdshift daemon --http HOST:PORT`` serves a read-only page of what the
daemon is doing, rendered on the server and refreshed in place, and the JSON behind it.

``page`` builds the page's content from the daemon's state and the store (what a Run shows, its
condensed log); ``charts`` the charts at its end (cost, outcomes, label to ready); ``run_page``
a Run's own page (its record, timeline, Repairs and Sessions replayed) and its Session logs to
download; ``app`` is the Starlette application (routes, the token check, the templates);
``server`` runs it with uvicorn in a thread of the daemon's process; ``webhook`` checks
GitHub's webhook deliveries the same server takes at ``POST /webhook``.
"""

from typing import TYPE_CHECKING, Any

from thirdshift.web.charts import ChartSource, StoreChartSource
from thirdshift.web.page import PageSource, StorePageSource
from thirdshift.web.webhook import DeliveryRefused, WebhookDelivery, WebhookInbox, wakes_a_poll

if TYPE_CHECKING:
    from thirdshift.web.app import make_app
    from thirdshift.web.server import StatusServer


def __getattr__(name: str) -> Any:
    """The application and its server, loaded when first asked for: Starlette, Jinja and
    uvicorn cost every thirdshift process 60 ms, and only a served page needs them."""
    if name == "make_app":
        from thirdshift.web.app import make_app

        return make_app
    if name == "StatusServer":
        from thirdshift.web.server import StatusServer

        return StatusServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ChartSource",
    "DeliveryRefused",
    "PageSource",
    "StatusServer",
    "StoreChartSource",
    "StorePageSource",
    "WebhookDelivery",
    "WebhookInbox",
    "make_app",
    "wakes_a_poll",
]
