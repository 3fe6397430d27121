"""The composition root of a Run: the one place real adapters are built and wired together.

Both ``thirdshift run`` and ``thirdshift demo`` come through here, so the demo runs exactly
what a user runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from thirdshift.delivery import Delivery, RunRequest
from thirdshift.errors import ConfigError, Interrupted, ThirdshiftError
from thirdshift.github import GitHub
from thirdshift.harnesses import harness_named
from thirdshift.issue_url import IssueRef, check_same_host
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store


def run_issue(
    settings: Settings,
    request: RunRequest,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
) -> int:
    """Run one issue and return the exit status. Errors before the Run starts (pre-flight)
    are reported on ``progress`` and change nothing."""
    token = settings.github_token.get_secret_value().strip() if settings.github_token else ""
    if not token:
        raise ConfigError("no GitHub token: set GITHUB_TOKEN (or THIRDSHIFT_GITHUB_TOKEN)")
    scrub = Scrubber.from_environment(environ, [token])

    def say(line: str) -> None:
        progress(scrub(line))

    check_same_host(request.issue, settings.github_api_url)
    harness = harness_named(settings.harness, extra_args=settings.harness_args)

    def sleep(seconds: float) -> None:
        """GitHub's retry and rate-limit waits end at once on Ctrl-C or SIGTERM."""
        if interrupt.wait(seconds):
            raise Interrupted("interrupted")

    store = Store.open(settings.effective_database_url)
    try:
        delivery = Delivery(
            settings=settings,
            github=GitHub(settings.github_api_url, token, progress=say, sleep=sleep),
            store=store,
            harness=harness,
            environ=environ,
            token=token,
            scrub=scrub,
            progress=say,
            interrupt=interrupt,
            emit_url=emit_url,
        )
        try:
            return delivery.run(request)
        except ThirdshiftError as error:
            say(f"thirdshift: {error}")
            return error.exit_code
    finally:
        store.close()


__all__ = ["IssueRef", "RunRequest", "run_issue"]
