"""The composition root of a Run: the one place real adapters, the scrubber and the clock are
built and wired together.

Both ``thirdshift run`` and ``thirdshift demo`` come through here, so the demo runs exactly
what a user runs. Below this module nothing reads the process environment, builds an adapter
or makes its own scrubber: each receives what it needs from here.
"""

from __future__ import annotations

import os
import pwd
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from thirdshift.clock import SystemClock
from thirdshift.errors import ConfigError, ThirdshiftError
from thirdshift.git import Identity, ManagedClone
from thirdshift.github import GitHub
from thirdshift.harnesses import harness_named, probe
from thirdshift.home import Home, check_home
from thirdshift.issue_url import IssueRef, check_same_host
from thirdshift.records import RepoInfo
from thirdshift.runs import Delivery, RunRequest
from thirdshift.scrub import Scrubber, looks_secret
from thirdshift.sessions.cli_outside import CliSessions
from thirdshift.settings import Settings
from thirdshift.store import Store


def hidden_from_agents(settings: Settings, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """Directories an agent must not see besides thirdshift's home: the user's home (from the
    environment, else the password database), the SQLite database's directory, and the
    Harnesses' own configuration directories (their transcripts of other work)."""
    found = [Path(environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir)]
    if settings.sqlite_directory is not None:
        found.append(settings.sqlite_directory)
    found += [
        Path(environ[name]) for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME") if environ.get(name)
    ]
    return tuple(found)


def run_issue(
    settings: Settings,
    request: RunRequest,
    *,
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    emit_url: Callable[[str], None],
    interrupt: threading.Event,
    agent_environ: Mapping[str, str] | None = None,
) -> int:
    """Run one issue and return the exit status. Errors before the Run starts (pre-flight)
    are reported on ``progress`` and change nothing.

    ``environ`` is thirdshift's own process environment: its secrets are scrubbed and emptied
    for git. ``agent_environ`` (default: the same) is what the Harness's environment is built
    from; the demo gives one pointing the CLI at the scripted model server."""
    token = settings.github_token.get_secret_value().strip() if settings.github_token else ""
    if not token:
        raise ConfigError("no GitHub token: set GITHUB_TOKEN (or THIRDSHIFT_GITHUB_TOKEN)")
    harness_base = environ if agent_environ is None else agent_environ
    agent_secrets = [value for name, value in harness_base.items() if looks_secret(name)]
    scrub = Scrubber.from_environment(environ, [token, *agent_secrets])

    def say(line: str) -> None:
        progress(scrub(line))

    check_same_host(request.issue, settings.github_api_url)
    harness = harness_named(settings.harness, extra_args=settings.harness_args)
    # Local pre-flight: a machine problem stops here, before anything on GitHub changes.
    home = Home(settings.home)
    check_home(home, database_dir=settings.sqlite_directory, min_free_mb=settings.min_free_disk_mb)
    sandbox = probe(environ.get("PATH"), unsafe_without=settings.unsafe_agent_without_sandbox)
    if not sandbox.sealed:
        say("warning: the agent runs without its sandbox (unsafe_agent_without_sandbox)")
    # Every wait (GitHub's retries and rate limits, CI polls) ends at once on Ctrl-C or SIGTERM.
    clock = SystemClock(interrupt)
    identity = Identity(settings.git_user_name, settings.git_user_email)

    def clone_of(ref: IssueRef, repo: RepoInfo) -> ManagedClone:
        return ManagedClone(
            settings.home,
            ref.owner,
            ref.repo,
            repo.clone_url,
            token,
            identity,
            scrub=scrub,
            environ=environ,
        )

    # The agent commits as the factory: its HOME may hold no git identity at all.
    session_environ = {
        **harness_base,
        "GIT_AUTHOR_NAME": identity.name,
        "GIT_AUTHOR_EMAIL": identity.email,
        "GIT_COMMITTER_NAME": identity.name,
        "GIT_COMMITTER_EMAIL": identity.email,
    }
    store = Store.open(settings.effective_database_url)
    try:
        delivery = Delivery(
            settings=settings,
            github=GitHub(settings.github_api_url, token, scrub=scrub, clock=clock, progress=say),
            store=store,
            session_source=CliSessions(
                harness=harness,
                store=store,
                environ=session_environ,
                logs_dir=settings.home / "logs",
                watchdogs=settings.session_watchdogs,
                grace_seconds=settings.session_stop_grace_seconds,
                interrupt=interrupt,
                progress=say,
                scrub=scrub,
                clock=clock,
                sandbox=sandbox,
                home=home,
                hidden=hidden_from_agents(settings, environ),
                model=settings.model,
            ),
            clones=clone_of,
            environ=harness_base,
            scrub=scrub,
            clock=clock,
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
