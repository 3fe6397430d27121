"""Settings: one strict configuration, read once by the composition root and passed down.

Sources, highest priority first: ``THIRDSHIFT_*`` environment variables (and ``GITHUB_TOKEN``),
then the TOML file ``$THIRDSHIFT_HOME/config.toml``, then the defaults below. An unknown key, in
the file or as a ``THIRDSHIFT_*`` variable, or a value of the wrong type stops with a
``ConfigError`` that names the file (or variable) and the key: a typo must never silently fall
back to a default.

About 700 lines, most of them field declarations with their descriptions: one class, so
that every key is documented and validated in the one place the schema is generated from.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from apscheduler.triggers.cron import CronTrigger
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from thirdshift.errors import ConfigError
from thirdshift.harness_registry import DEFAULT_HARNESS, HARNESS_NAMES, harness_names_listed
from thirdshift.network import parse_host_pattern
from thirdshift.records import OutputCaps, Watchdogs

ENV_PREFIX = "THIRDSHIFT_"
PUBLIC_GITHUB_API = "https://api.github.com"
# Variables outside the prefix that are still ours to read.
_TOKEN_VARIABLES = ("THIRDSHIFT_GITHUB_TOKEN", "GITHUB_TOKEN")


if TYPE_CHECKING:
    HarnessName = str
else:
    # A Literal of the Harness registry's names: pydantic refuses any other name with its own
    # message ("Input should be 'a' or 'b'") and the JSON schema lists them. mypy cannot read
    # a Literal built at run time, so it sees the str it is.
    HarnessName = Literal[HARNESS_NAMES]


_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


def check_repository_name(text: str) -> tuple[str, str]:
    """``OWNER/NAME`` split in two, or a ValueError that shows the expected shape."""
    if not _REPOSITORY.match(text) or text.split("/")[1] in (".", ".."):
        raise ValueError(f"'{text}' is not OWNER/NAME (for example octo-org/widgets)")
    owner, name = text.split("/")
    return owner, name


GITHUB_POINTS_PER_MINUTE = 900
"""GitHub's secondary limit on REST points a minute (a read costs 1, a write 5)."""

_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


def check_owner_name(text: str) -> str:
    """A GitHub user or organisation name, or a ValueError that shows the expected shape."""
    if not _OWNER.match(text):
        raise ValueError(
            f"'{text}' is not a GitHub user or organisation name (for example octo-org: "
            "letters, digits and dashes)"
        )
    return text


def cron_trigger(expression: str) -> CronTrigger:
    """The schedule of a five-field cron expression in UTC, or a ValueError saying the shape."""
    try:
        fields = expression.split()
        if len(fields) == 5:
            if not fields[2].startswith("*") and not fields[4].startswith("*"):
                # cron runs on either, APScheduler only on both: refuse rather than surprise.
                raise ValueError("give a day of the month or a weekday, not both")
            # cron counts weekdays from Sunday (0 or 7); APScheduler from Monday.
            fields[4] = _cron_weekdays(fields[4])
        trigger = CronTrigger.from_crontab(" ".join(fields), timezone="UTC")
        if trigger.get_next_fire_time(None, _CRON_CHECKED_FROM) is None:
            raise ValueError("it never comes (no such date)")
        return trigger
    except ValueError as error:
        raise ValueError(
            f"'{expression}' is not a cron expression of five fields (minute hour day month "
            f"weekday), like '0 3 * * 1' for Mondays at 03:00 UTC: {error}"
        ) from None


_CRON_CHECKED_FROM = datetime(2026, 1, 1, tzinfo=UTC)
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _cron_weekdays(field: str) -> str:
    """Cron's weekday field with its numbers as names (``1-5`` is ``mon,tue,wed,thu,fri``),
    which APScheduler reads as cron does."""
    if field == "*":
        return field
    days: list[str] = []
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        if not (span == "*" or span.replace("-", "").isdigit()):
            days.append(part)  # a name (mon, tue-fri), or a shape APScheduler explains
            continue
        step = int(step_text) if step_text.isdigit() else 1
        if step_text and not step_text.isdigit():
            return field
        first, _, last = span.partition("-")
        low, high = (0, 6) if span == "*" else (int(first), int(last or first))
        if not (0 <= low <= 7 and 0 <= high <= 7 and low <= high and step >= 1):
            raise ValueError(f"the weekday field '{field}' must count 0 to 7 (0 and 7 are Sunday)")
        days += [_DAYS[day] for day in range(low, high + 1, step) if _DAYS[day] not in days]
    return ",".join(days)


def default_home(environ: Mapping[str, str]) -> Path:
    """``$THIRDSHIFT_HOME`` when set, else ``~/.thirdshift``."""
    raw = environ.get("THIRDSHIFT_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".thirdshift"


def config_file(environ: Mapping[str, str]) -> Path:
    return default_home(environ) / "config.toml"


class ModelPrice(BaseModel):
    """One model's price, in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0, description="Input tokens not served from the cache.")
    output: float = Field(ge=0, description="Output tokens.")
    cached_input: float | None = Field(
        default=None, ge=0, description="Cache reads; default: the input price."
    )
    cache_write: float | None = Field(
        default=None, ge=0, description="Cache writes; default: the input price."
    )


class Settings(BaseSettings):
    """Every knob thirdshift has. Field names are the TOML keys; ``THIRDSHIFT_<NAME>`` is the
    environment variable of each."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        populate_by_name=True,
    )

    home: Path = Field(description="Where thirdshift keeps its database, clones and logs.")
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; default a SQLite file thirdshift.db in the home.",
    )
    github_api_url: str = Field(
        default=PUBLIC_GITHUB_API, description="GitHub's REST API root (or the sandbox's)."
    )
    github_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("THIRDSHIFT_GITHUB_TOKEN", "GITHUB_TOKEN", "github_token"),
        description="The token thirdshift acts with; never written anywhere.",
    )

    github_login: str | None = Field(
        default=None,
        max_length=100,
        description="The login thirdshift acts as, when its token cannot say (a workflow's "
        "GITHUB_TOKEN: github-actions[bot]); with a GitHub App it is asked of the App.",
    )
    github_app_id: int | None = Field(
        default=None,
        gt=0,
        description="A GitHub App's id: with its private key, thirdshift acts with the App's "
        "installation tokens (renewed as they age) instead of github_token.",
    )
    github_app_private_key: SecretStr | None = Field(
        default=None,
        description="The GitHub App's private key (the whole .pem text); never written anywhere.",
    )
    github_app_private_key_file: Path | None = Field(
        default=None, description="A file holding the GitHub App's private key, instead."
    )

    harness: HarnessName = Field(
        default=DEFAULT_HARNESS, description=f"The Harness of a Run: {harness_names_listed()}."
    )
    model: str | None = Field(default=None, description="The Model; default: the Harness's own.")
    harness_args: list[str] = Field(
        default_factory=list,
        description="Extra options given to the Harness CLI in every session (e.g. Codex -c "
        "settings of a model provider).",
    )
    git_user_name: str = Field(
        default="thirdshift", min_length=1, description="Author of the factory's own commits."
    )
    git_user_email: str = Field(
        default="thirdshift@users.noreply.github.com",
        pattern=r"^[^@\s]+@[^@\s]+$",
        description="E-mail of the factory's own commits.",
    )
    ready_label: str = Field(
        default="ready-for-agent",
        min_length=1,
        description="The label that asks for a Run; the daemon picks up issues that carry it.",
    )
    in_progress_label: str = Field(
        default="in-progress", min_length=1, description="The label a Claim puts on its issue."
    )
    merge_label: str = Field(
        default="thirdshift-merge",
        min_length=1,
        description="A Ready issue that also carries this label runs as a Merge run in the "
        "daemon (a Base fix issue carries it).",
    )
    base_fix: bool = Field(
        default=False,
        description="When only Inherited failures are red, open an issue to fix the Base "
        "branch's red checks as a Merge run, and hold the issue until it is closed.",
    )
    max_repairs: int = Field(default=5, ge=0, description="Repairs allowed per Run.")
    max_upstream_moves: int = Field(
        default=5, ge=0, description="Times a Run merges a moving Base branch in again."
    )
    review_handle: str = Field(
        default="thirdshift",
        pattern=r"^@?[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$",
        description="The name people mention (@thirdshift) in a comment on one of thirdshift's "
        "pull requests to ask it for a change.",
    )
    max_review_repairs: int = Field(
        default=3,
        ge=0,
        description="Review Repairs per pull request; past them, review feedback is left to "
        "people.",
    )
    ci_grace_seconds: float = Field(
        default=60, ge=0, description="How long no check on a head means CI is absent."
    )
    ci_poll_seconds: float = Field(default=10, gt=0, description="Between two looks at CI.")
    ci_timeout_seconds: float = Field(
        default=3 * 3600, gt=0, description="Give up on checks still pending after this long."
    )
    lease_seconds: float = Field(
        default=600,
        gt=0,
        description="How long a Claim's Lease lasts unless renewed; a live Run renews it every "
        "third of that, so a killed one frees the issue this long after it died.",
    )
    session_idle_seconds: float = Field(
        default=1800, gt=0, description="Stop a session that prints nothing for this long."
    )
    session_wall_seconds: float = Field(
        default=4 * 3600, gt=0, description="Stop a session that runs longer than this."
    )
    session_post_result_seconds: float = Field(
        default=60,
        gt=0,
        description="After a session's final result, how long to wait for its background work "
        "before stopping it (that work then counts as killed, and the session gets a Resume).",
    )
    session_stop_grace_seconds: float = Field(
        default=10, gt=0, description="Between each stop signal, and before the final kill."
    )
    session_line_cap_bytes: int = Field(
        default=OutputCaps.line_bytes,
        ge=64 * 1024,
        description="A longer stdout line of a session is cut: its head kept, the rest dropped.",
    )
    session_log_cap_bytes: int = Field(
        default=OutputCaps.log_bytes,
        ge=64 * 1024,
        description="Past this, a Session log counts the lines it would keep, not keeping them.",
    )
    session_max_processes: int = Field(
        default=512,
        ge=16,
        description="The most processes a session (its CLI and all it starts) may run at once; "
        "a fork past it is refused and the session stopped as a Failed run.",
    )
    session_memory_mb: int = Field(
        default=4096,
        ge=128,
        description="The memory a session may use, its files in /tmp, /var/tmp and /run "
        "included; past it the kernel kills one of its processes and the session is stopped as "
        "a Failed run.",
    )
    session_tmpfs_mb: int = Field(
        default=1024,
        ge=1,
        description="The size of each of /tmp, /var/tmp and /run inside the agent sandbox; a "
        "write past it fails with no space left.",
    )
    session_disk_mb: int = Field(
        default=10240,
        ge=1,
        description="How much a session may grow its Worktree, the Worktree's repository "
        "and its private home; past it the session is stopped as a Failed run.",
    )
    session_max_files: int = Field(
        default=200_000,
        ge=1,
        description="How many files (directories and links included) a session may add to its "
        "Worktree, the Worktree's repository and its private home; past it the session is "
        "stopped as a Failed run.",
    )
    session_disk_check_seconds: float = Field(
        default=5,
        gt=0,
        description="How often a running session's disk use is measured against session_disk_mb.",
    )
    unsafe_unbounded_sessions: bool = Field(
        default=False,
        description="Run sessions without a cgroup of their own when this machine offers none "
        "(no root, no delegated cgroup v2 subtree). Unsafe: one session can then start "
        "processes and fill memory until the host, the daemon included, stops.",
    )
    unsafe_agent_without_sandbox: bool = Field(
        default=False,
        description="Run agents without the bubblewrap sandbox. Unsafe: an agent can then read "
        "thirdshift's token from its process and its files.",
    )
    unsafe_agent_network: bool = Field(
        default=False,
        description="Let sealed agents share the host's network instead of their own behind "
        "the egress proxy. Unsafe: an agent can then reach every service on this host and its "
        "network (the database, the status page, a cloud's metadata address).",
    )
    unsafe_agent_holds_model_key: bool = Field(
        default=False,
        description="Let a Harness whose credential cannot be kept outside the sandbox (a "
        "login file the CLI reads and refreshes itself) run with it inside. Unsafe: a hostile "
        "session can then read the model key and push it. Without it such a session does not "
        "start; with a key in the provider's variable the model gateway keeps it outside.",
    )
    agent_network_allow: list[str] = Field(
        default_factory=list,
        description="Hosts every agent session may reach besides its model provider, as "
        "host[:port] (port 443 when left out; *.name for the names below one), for example "
        "registry.example.com or *.packages.example.org. A name is reached at public "
        "addresses only; write an address to allow a private one.",
    )
    agent_network_allow_by_repository: dict[str, list[str]] = Field(
        default_factory=dict,
        description="More hosts for the agent sessions of one repository, by OWNER/NAME, in "
        "the form of agent_network_allow.",
    )
    allow_workflow_changes: bool = Field(
        default=False,
        description="Push commits that add, change or remove workflow files "
        "(.github/workflows/**, .github/actions/**, action.yml or action.yaml anywhere). Off, "
        "such a push is refused and the Run fails: CI runs those files with the repository's "
        "secrets.",
    )
    allow_workflow_changes_by_repository: dict[str, bool] = Field(
        default_factory=dict,
        description="allow_workflow_changes for one repository, by OWNER/NAME, over the "
        "global one.",
    )
    salvage_wait_seconds: float = Field(
        default=120,
        ge=0,
        description="After Ctrl-C or SIGTERM, how long the Failed run may wait in all for "
        "GitHub's retries and rate limits while it saves the work; also how long a Run's endings "
        "are tried again while the database is away.",
    )
    min_free_disk_mb: int = Field(
        default=512,
        ge=0,
        description="Refuse to start a Run, or any of its sessions, with less free disk (MiB) "
        "in the home.",
    )
    resume_preamble_tokens: int = Field(
        default=4000,
        ge=200,
        description="The resume preamble's budget (what an earlier session did), apart from "
        "the prompt it follows.",
    )
    follow_up_preamble_tokens: int = Field(
        default=2000,
        ge=200,
        description="The follow-up preamble's budget (what the sessions before a Repair or a "
        "Continuation did).",
    )
    spec_parallel: int = Field(
        default=3,
        ge=1,
        description="How many Tickets of a Spec run at once (thirdshift run --parallel "
        "overrides it).",
    )

    # -- the daemon ------------------------------------------------------------------------------
    repositories: list[str] = Field(
        default_factory=list,
        description="OWNER/NAME of each repository the daemon watches (thirdshift daemon --repo "
        "adds more).",
    )
    owners: list[str] = Field(
        default_factory=list,
        description="Users or organisations whose every repository the daemon watches (thirdshift "
        "daemon --owner adds more): those the token may push to, archived and disabled ones "
        "aside, found again every owner_refresh_seconds. Needs a token; a GitHub App's "
        "installation cannot list them.",
    )
    excluded_repositories: list[str] = Field(
        default_factory=list,
        description='Glob patterns on OWNER/NAME (any case, e.g. "acme/legacy-*") of the '
        "owners' repositories the daemon leaves alone.",
    )
    owner_refresh_seconds: float = Field(
        default=300,
        ge=10,
        description="Between two listings of the owners' repositories (a repository made or "
        "archived is picked up without a restart).",
    )
    owner_listing: bool = Field(
        default=True,
        description="Find the Ready and in-progress issues of the owners' repositories with "
        "one listing per owner each poll (two requests an owner), not one per repository "
        "(adr/0048). Off: every repository is listed on its own.",
    )
    owner_recheck_seconds: float = Field(
        default=300,
        ge=10,
        description="Under an owner's listing, how long a Ready issue passed over for what the "
        "listing cannot show (its blockers, its labeller's role) waits before those are read "
        "again (a webhook delivery for the owner has them read at its repository's next poll); "
        "and how long before an owner GitHub refused to list is asked again.",
    )
    daemon_name: str | None = Field(
        default=None,
        max_length=100,
        description="How a daemon names itself in claim comments, Leases and the Activity log; "
        "default: the host's name.",
    )
    poll_seconds: float = Field(
        default=60, gt=0, description="Between two polls of one repository for Ready issues."
    )
    poll_jitter_seconds: float = Field(
        default=10,
        ge=0,
        description="Up to this much is added at random to each poll, so repositories and "
        "daemons do not all ask GitHub at once.",
    )
    settle_seconds: float = Field(
        default=60,
        ge=0,
        description="An issue is picked up only once it has been unchanged this long (people "
        "often label first and finish writing after).",
    )
    max_runs: int = Field(default=2, ge=1, description="Runs a daemon executes at once.")
    max_runs_per_repository: int = Field(
        default=1, ge=1, description="Runs a daemon executes at once in one repository."
    )
    excluded_labels: list[str] = Field(
        default_factory=lambda: ["needs-triage", "needs-info", "ready-for-human", "wontfix"],
        description="An issue carrying any of these is never picked up, Ready label or not.",
    )

    # -- Architect runs --------------------------------------------------------------------------
    architect_schedule: dict[str, str] = Field(
        default_factory=dict,
        description='OWNER/NAME -> a cron expression (five fields, UTC, e.g. "0 3 * * 1"): '
        "when the daemon makes an Architect run on that repository (at its first poll from "
        "then on). A repository without one gets none from the daemon.",
    )
    architect_plans_per_week: int = Field(
        default=1,
        ge=1,
        description="Architect plans and ideas published on one repository in 7 days, at most; "
        "an Architect run after that is skipped.",
    )
    architect_max_tickets: int = Field(
        default=5,
        ge=1,
        le=20,
        description="Tickets one Architect plan may have; a result with more fails the run.",
    )
    architect_hand_over: bool = Field(
        default=False,
        description="Label a published plan's Spec ready-for-agent (in place of "
        "needs-triage; a plan of one Ticket: that Ticket) so the daemon runs it as one Spec "
        "run. Off: a person triages the plan first.",
    )
    http_token: SecretStr | None = Field(
        default=None,
        description="The token the daemon's status page asks for (required beyond loopback).",
    )
    http_hosts: list[str] = Field(
        default_factory=list,
        description="Further names the status page answers to (a request's Host header), "
        "besides loopback, its bind address and, on 0.0.0.0 or ::, this host's own names and "
        "addresses: for example a DNS name or a proxy's.",
    )
    public_url: str | None = Field(
        default=None,
        description="The status page's address as people reach it (http:// or https://, a "
        "proxy's too): the pull requests and Failed run comments thirdshift writes then link "
        "each Run's page, <public_url>/runs/<id>.",
    )
    webhook_secret: SecretStr | None = Field(
        default=None,
        description="The secret of the GitHub webhook that sends deliveries to the daemon's "
        "POST /webhook (served with --http): each delivery must be signed with it. A "
        "delivery makes the daemon poll its repository at once.",
    )
    github_requests_per_minute: int = Field(
        default=600,
        ge=10,
        description="Requests to GitHub's API a process sends in a minute at most, across its "
        "polls and Runs. GitHub allows 900 points a minute, a write costing 5: this plus four "
        "times github_writes_per_minute must stay under 900.",
    )
    github_writes_per_minute: int = Field(
        default=60,
        ge=1,
        description="Content-creating requests (POST, PATCH, PUT, DELETE) a process sends to "
        "GitHub in a minute at most (GitHub's secondary limit: 80).",
    )
    github_writes_per_hour: int = Field(
        default=400,
        ge=1,
        description="Content-creating requests a process sends to GitHub in an hour at most "
        "(GitHub's secondary limit: 500).",
    )
    poll_seconds_with_webhooks: float = Field(
        default=300,
        gt=0,
        description="Between two polls of one repository once webhook deliveries have arrived: "
        "the polls are then a backstop for a missed delivery.",
    )
    # Usage ledger and budgets
    cost_budget_per_run_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="A Run that has spent this much (USD) ends as a Failed run; none: no cap.",
    )
    cost_budget_per_repository_day_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="What one repository's Runs may spend in a UTC day (USD); none: no cap.",
    )
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="USD per million tokens, by model, to price sessions whose CLI reports no "
        "cost (codex), and a claude session while it runs.",
    )
    # Harness switch
    harness_fallbacks: list[HarnessName] = Field(
        default_factory=list,
        description="The Harnesses a Run continues on, in order, when its Harness's model "
        "provider is down after the CLI's retries (empty: no switch, the session fails).",
    )
    harness_models: dict[HarnessName, str] = Field(
        default_factory=dict,
        description="The Model of each Harness by name; wins over model. A Harness switched "
        "to never inherits the Model of the one it left.",
    )
    harness_options: dict[HarnessName, list[str]] = Field(
        default_factory=dict,
        description="Extra CLI options of each Harness by name, wherever it runs (the Run's "
        "own Harness or a fallback); harness_args stay with the Run's own Harness.",
    )
    harness_paths: list[Path] = Field(
        default_factory=list,
        description="Directories searched for the Harness CLIs, in order, before the "
        "node_modules/.bin of the project thirdshift's virtual environment lies in, and before "
        "PATH.",
    )
    provider_wait_seconds: float = Field(
        default=300,
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description="A provider reset announced within this long is waited for (once) before "
        "switching the Harness.",
    )
    provider_pause_seconds: float = Field(
        default=300,
        ge=0,
        le=86400,
        allow_inf_nan=False,
        description="How long a daemon pauses pickups for a Harness whose provider is down and "
        "announced no reset.",
    )
    # Notifications
    notify_webhook_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+",
        description="Where each Run end (and each pass-over for permissions) is POSTed as JSON, "
        "signed with notify_webhook_secret; it may hold a secret, so it is never printed.",
    )
    notify_webhook_secret: SecretStr | None = Field(
        default=None,
        description="The shared secret of the webhook's HMAC-SHA256 signature; never written "
        "anywhere.",
    )
    notify_urls: list[str] = Field(
        default_factory=list,
        description="Apprise URLs (chat, e-mail, ...) that get the same messages as text; they "
        "hold secrets, so they are never printed.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what ``load_settings`` hands over: it reads the environment it is given and the
        # file itself, so nothing here looks at the process environment behind the root's back.
        return (init_settings,)

    def model_for(self, harness: str) -> str | None:
        """The Model of ``harness``: its ``harness_models`` entry, else ``model`` when it is the
        Run's own Harness, else the Harness's own default (None). Never another's."""
        for name, chosen in self.harness_models.items():
            if name == harness and chosen:
                return chosen
        return self.model if harness == self.harness else None

    @property
    def fallback_harnesses(self) -> list[HarnessName]:
        """``harness_fallbacks`` without the Run's own Harness and without repeats."""
        found: list[HarnessName] = []
        for name in self.harness_fallbacks:
            if name != self.harness and name not in found:
                found.append(name)
        return found

    @property
    def session_output_caps(self) -> OutputCaps:
        return OutputCaps(self.session_line_cap_bytes, self.session_log_cap_bytes)

    @property
    def session_watchdogs(self) -> Watchdogs:
        return Watchdogs(
            idle_seconds=self.session_idle_seconds,
            wall_seconds=self.session_wall_seconds,
            post_result_seconds=self.session_post_result_seconds,
        )

    @field_validator(
        "github_login",
        "github_app_id",
        "github_app_private_key",
        "github_app_private_key_file",
        "http_token",
        "public_url",
        "webhook_secret",
        "notify_webhook_url",
        "notify_webhook_secret",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # A workflow passes an unset secret as an empty string.
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        return None if isinstance(text, str) and not text.strip() else value

    @field_validator("public_url")
    @classmethod
    def _page_address(cls, value: str | None) -> str | None:
        return None if value is None else page_address(value)

    @field_validator("repositories")
    @classmethod
    def _owner_slash_name(cls, value: list[str]) -> list[str]:
        for entry in value:
            check_repository_name(entry)
        return value

    @field_validator("owners")
    @classmethod
    def _owner_names(cls, value: list[str]) -> list[str]:
        for entry in value:
            check_owner_name(entry)
        return value

    @model_validator(mode="after")
    def _pace_under_githubs_points(self) -> Settings:
        points = self.github_requests_per_minute + 4 * self.github_writes_per_minute
        if points > GITHUB_POINTS_PER_MINUTE:
            raise ValueError(
                f"github_requests_per_minute ({self.github_requests_per_minute}) plus four "
                f"times github_writes_per_minute ({self.github_writes_per_minute}) is {points} "
                f"points a minute, over GitHub's {GITHUB_POINTS_PER_MINUTE}; lower either"
            )
        return self

    @model_validator(mode="after")
    def _harness_paths_outside_the_home(self) -> Settings:
        # Agents write under the home (their homes, the worktrees): a CLI found there would be
        # one an agent planted, run by the doctor and the Runs with thirdshift's own rights.
        home = Path(os.path.realpath(self.home))
        for entry in self.harness_paths:
            if Path(os.path.realpath(entry)).is_relative_to(home):
                raise ValueError(
                    f"harness_paths: {entry} lies in thirdshift's home ({self.home}), where "
                    "agents write; install the CLIs elsewhere (scripts/install puts them in the "
                    "checkout's node_modules/.bin)"
                )
        return self

    @field_validator("agent_network_allow")
    @classmethod
    def _host_patterns(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_host_pattern(entry)
        return value

    @field_validator("agent_network_allow_by_repository")
    @classmethod
    def _host_patterns_per_repository(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for repository, entries in value.items():
            check_repository_name(repository)
            for entry in entries:
                parse_host_pattern(entry)
        return value

    def agent_network_allow_for(self, owner: str, name: str) -> tuple[str, ...]:
        """The hosts the agent sessions of ``owner/name`` may reach besides the provider."""
        wanted = f"{owner}/{name}".lower()
        own = [v for k, v in self.agent_network_allow_by_repository.items() if k.lower() == wanted]
        return tuple(dict.fromkeys([*self.agent_network_allow, *(e for v in own for e in v)]))

    @field_validator("allow_workflow_changes_by_repository")
    @classmethod
    def _repositories_allowing_workflows(cls, value: dict[str, bool]) -> dict[str, bool]:
        for repository in value:
            check_repository_name(repository)
        return value

    def allow_workflow_changes_for(self, owner: str, name: str) -> bool:
        """Whether commits pushed to ``owner/name`` may touch workflow files."""
        wanted = f"{owner}/{name}".lower()
        own = [
            v for k, v in self.allow_workflow_changes_by_repository.items() if k.lower() == wanted
        ]
        return own[-1] if own else self.allow_workflow_changes

    @field_validator("harness_paths")
    @classmethod
    def _absolute_directories(cls, value: list[Path]) -> list[Path]:
        for entry in value:
            if not entry.expanduser().is_absolute():
                raise ValueError(
                    f"{entry} is not an absolute path; give each directory whole (/opt/agents/bin)"
                )
        return [entry.expanduser() for entry in value]

    @field_validator("architect_schedule")
    @classmethod
    def _cron_per_repository(cls, value: dict[str, str]) -> dict[str, str]:
        for repository, expression in value.items():
            check_repository_name(repository)
            cron_trigger(expression)
        return value

    @property
    def sqlite_directory(self) -> Path | None:
        """The directory of the SQLite database file, or None for another database."""
        url = self.effective_database_url
        if not url.startswith("sqlite:///"):
            return None
        path = url.removeprefix("sqlite:///")
        return Path(path).parent if path and path != ":memory:" else None

    @property
    def effective_database_url(self) -> str:
        """The database URL in force: the setting, or SQLite in the home."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'thirdshift.db'}"


def page_address(url: str) -> str:
    """``public_url`` as kept: an http(s) address with a host and no query, fragment or
    credentials, without its trailing slash (the Run pages are ``<it>/runs/<id>``)."""
    fix = "give the status page's address as people open it, e.g. https://thirdshift.example.org"
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url.split()) > 1:
        raise ValueError(f"not an http:// or https:// address with a host; {fix}")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise ValueError(f"an address without a query (?...) or a fragment (#...) is needed; {fix}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"an address must not carry credentials (it is published); {fix}")
    return url.strip().rstrip("/")


def _field_keys() -> dict[str, str]:
    """TOML key -> field name, for every setting."""
    return {name: name for name in Settings.model_fields}


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from exc


def _check_keys(path: Path, values: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    known = _field_keys()
    for key in values:
        if key == "home":
            raise ConfigError(
                f"{path}: key 'home' cannot be set inside the home; set THIRDSHIFT_HOME instead"
            )
        if key not in known:
            raise ConfigError(
                f"{path}: unknown key '{key}'; known keys are {', '.join(sorted(known))}"
            )
    for variable in environ:
        if not variable.startswith(ENV_PREFIX) or variable in _TOKEN_VARIABLES:
            continue
        if variable[len(ENV_PREFIX) :].lower() not in known:
            raise ConfigError(
                f"unknown setting {variable} in the environment; known settings are "
                + ", ".join(ENV_PREFIX + key.upper() for key in sorted(known))
            )


class _EnvironSource(EnvSettingsSource):
    """The ``THIRDSHIFT_*`` variables (and ``GITHUB_TOKEN``) of the environment the composition
    root passed in, parsed as pydantic-settings parses the process environment."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def with_harness(settings: Settings, harness: str | None, model: str | None) -> Settings:
    """``settings`` as ``thirdshift run --harness H --model M`` changes them. A ``--harness``
    other than the configured one takes neither the configured ``model`` (it names a Model of
    the other Harness) nor ``harness_args`` (options of the other CLI) along: its Model is
    ``--model``, else its ``harness_models`` entry, else its own default; its options are its
    ``harness_options`` entry."""
    update: dict[str, Any] = {}
    if harness and harness != settings.harness:
        update["harness"] = harness
        update["model"] = None
        # harness_args are options of the configured Harness's CLI (claude's -c is not codex's).
        update["harness_args"] = []
    if model:
        update["model"] = model
        # --model wins over the configuration, harness_models included.
        own = update.get("harness", settings.harness)
        update["harness_models"] = {**settings.harness_models, own: model}
    return settings.model_copy(update=update) if update else settings


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Build the Settings from ``environ`` (the composition root's environment) and the config
    file, or raise ConfigError naming the file or variable and the key at fault."""
    path = config_file(environ)
    file_values = _read_file(path)
    _check_keys(path, file_values, environ)
    home = default_home(environ)
    try:
        from_file = TomlConfigSettingsSource(Settings, toml_file=path)()
        from_environment = _EnvironSource(Settings, environ)()
        return Settings(**{**from_file, **from_environment, "home": home})
    except ValidationError as exc:
        raise _explain(exc, path, file_values, environ) from exc
    except SettingsError as exc:
        # A list or table given as plain text in the environment: name the variable and the
        # form it takes, never the value.
        field = str(exc).split('"')[1] if '"' in str(exc) else "?"
        annotation = (
            Settings.model_fields[field].annotation if field in Settings.model_fields else None
        )
        example = (
            '{"key": "value"}' if getattr(annotation, "__origin__", None) is dict else '["a", "b"]'
        )
        form = "an object" if example.startswith("{") else "a list"
        raise ConfigError(
            f"environment variable {ENV_PREFIX}{field.upper()}: not valid JSON; {form} is "
            f"written as JSON, for example {ENV_PREFIX}{field.upper()}='{example}'"
        ) from exc


def _named_setting(message: str) -> str:
    """The setting a check across settings blames: the one its message starts with."""
    named = re.match(r"(?:Value error, )?(\w+)", message)
    return named[1] if named and named[1] in Settings.model_fields else "?"


def _explain(
    exc: ValidationError, path: Path, file_values: Mapping[str, Any], environ: Mapping[str, str]
) -> ConfigError:
    error = exc.errors()[0]
    key = str(error["loc"][0]) if error["loc"] else _named_setting(error["msg"])
    field = "github_token" if key in _TOKEN_VARIABLES else key.lower()
    variables = _TOKEN_VARIABLES if field == "github_token" else (ENV_PREFIX + field.upper(),)
    set_variables = [name for name in variables if name in environ]
    if set_variables:
        where = f"environment variable {set_variables[0]}"
    elif field in file_values:
        where = f"{path}: key '{field}'"
    else:
        where = f"setting '{field}'"
    # A nested key (a model's price) is named by its path under the setting.
    inner = ".".join(str(part) for part in error["loc"][1:])
    detail = f"{inner}: {error['msg']}" if inner else error["msg"]
    # Never echo the offending value: it may be a secret.
    return ConfigError(f"{where}: {detail}")
