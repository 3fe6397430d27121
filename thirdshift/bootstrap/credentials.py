"""What thirdshift acts and speaks with, and the secrets of both: a personal token or a GitHub
App's installation tokens, the GitHub adapter acting with them, the Notifier, and every secret
of the settings the one scrubber must know (adr/0005)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import ConfigError, ThirdshiftError
from thirdshift.github import GitHub, PaceBudget, Pacer
from thirdshift.github.app import InstallationTokens
from thirdshift.github.requests import TOKEN, Credential
from thirdshift.harnesses.opencode import config_secrets
from thirdshift.notify import AppriseTarget, Target, TargetNotifier, WebhookTarget
from thirdshift.scrub import Scrubber, looks_secret
from thirdshift.settings import Settings, load_settings


@dataclass(frozen=True)
class Credentials:
    """What thirdshift acts on GitHub with, for one repository: the source of the current
    token, the login it acts as when the token cannot say, and the App installation it
    belongs to (None for a personal token)."""

    token: Callable[[], str]
    login: str | None
    installation: int | None
    words: Credential = TOKEN
    close: Callable[[], None] = lambda: None
    """Closes what mints the tokens (a GitHub App's connection), once the Run is over."""


def app_key(settings: Settings) -> str | None:
    """The GitHub App's private key, when an App is configured; ConfigError for half an App."""
    key_text = settings.github_app_private_key
    key_file = settings.github_app_private_key_file
    if key_text is not None and key_file is not None:
        raise ConfigError(
            "the GitHub App's private key is given twice (github_app_private_key and "
            "github_app_private_key_file); keep one"
        )
    key: str | None = None
    if key_text is not None:
        key = key_text.get_secret_value()
    elif key_file is not None:
        try:
            key = key_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(
                f"github_app_private_key_file {key_file}: cannot be read ({error}); give the "
                ".pem file GitHub generated for the App"
            ) from error
    if key is None and settings.github_app_id is None:
        return None
    if key is None:
        raise ConfigError(
            "THIRDSHIFT_GITHUB_APP_ID is set but the App's private key is not: set "
            "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY (or github_app_private_key_file; on GitHub "
            "Actions, the repository secret THIRDSHIFT_APP_PRIVATE_KEY)"
        )
    if settings.github_app_id is None:
        raise ConfigError(
            "a GitHub App's private key is set but not its id: set THIRDSHIFT_GITHUB_APP_ID "
            "(the App ID on the App's settings page; on GitHub Actions, the repository secret "
            "THIRDSHIFT_APP_ID)"
        )
    return key


def known_secrets(environ: Mapping[str, str]) -> list[str]:
    """Every secret of the settings a scrubber must know, as far as they can be read: for the
    commands that read (``logs``, ``doctor``), which must work without GitHub credentials."""
    try:
        settings = load_settings(environ)
    except ThirdshiftError:
        return []
    known = setting_secrets(settings)
    with suppress(ThirdshiftError):  # no GitHub credentials: nothing of theirs to hide
        known.extend(credential_secrets(settings))
    return known


def reading_scrubber(environ: Mapping[str, str]) -> Scrubber:
    """The scrubber of a command that reads (``logs``, ``doctor``): it knows the environment's
    secrets and those of the settings, as far as they can be read."""
    return Scrubber.from_environment(environ, known_secrets(environ))


def run_secrets(settings: Settings) -> list[str]:
    """The secrets of settings a Run (or a daemon) acts with: its credentials' and the others.
    ConfigError when there are no credentials."""
    return [*credential_secrets(settings), *setting_secrets(settings)]


def agent_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values of the variables whose names say they are secret, in what a Harness's
    environment is built from, and the secrets inside OpenCode's inline configuration."""
    named = [value for key, value in environ.items() if looks_secret(key)]
    return [*named, *config_secrets(environ)]


def setting_secrets(settings: Settings) -> list[str]:
    """The secrets of the settings besides GitHub's: the notification targets', the status
    page's token and the webhook deliveries' secret."""
    page = [settings.http_token.get_secret_value()] if settings.http_token is not None else []
    hook = [settings.webhook_secret.get_secret_value()] if settings.webhook_secret else []
    return [*notification_secrets(settings), *page, *hook]


def notification_secrets(settings: Settings) -> list[str]:
    """The secret texts of the notification settings, for the scrubber: the webhook's secret
    and URL (a URL may carry a token in its path), and each Apprise URL whole and in the parts
    that carry its credentials (user, password, host-like tokens, path and query words)."""
    found: list[str] = []
    if settings.notify_webhook_secret is not None:
        found.append(settings.notify_webhook_secret.get_secret_value())
    if settings.notify_webhook_url:
        found.append(settings.notify_webhook_url)
    for url in settings.notify_urls:
        found += [url, *url_secret_parts(url)]
    return [value for value in found if value.strip()]


def url_secret_parts(url: str) -> list[str]:
    """The parts of an Apprise URL that may be credentials: every user, password, host, path
    segment and query value of 8 characters or more, except plain host names (``gmail.com``),
    which would otherwise be scrubbed out of every message."""
    parts = urlsplit(url)
    words = [parts.username or "", parts.password or "", parts.hostname or ""]
    words += [unquote(segment) for segment in parts.path.split("/")]
    words += [value for _, value in parse_qsl(parts.query)]
    return [word for word in words if len(word) >= 8 and not _HOST_NAME.fullmatch(word)]


_HOST_NAME = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")


def notifier_of(
    settings: Settings, *, scrub: Scrubber, progress: Callable[[str], None]
) -> TargetNotifier:
    """The Notifier of the configured targets (none: it sends nothing). A webhook without its
    secret, or an Apprise URL Apprise does not know, is a ConfigError before anything starts."""
    targets: list[Target] = []
    if settings.notify_webhook_url:
        secret = settings.notify_webhook_secret
        targets.append(
            WebhookTarget(settings.notify_webhook_url, secret.get_secret_value() if secret else "")
        )
    targets += [AppriseTarget(url, i) for i, url in enumerate(settings.notify_urls, start=1)]
    return TargetNotifier(targets, scrub=scrub, progress=progress)


def credential_secrets(settings: Settings) -> list[str]:
    """The secret texts of the configured credentials, for the scrubber: the App's private
    key (whole and line by line), or the token. ConfigError when there are none."""
    key = app_key(settings)
    if key is not None:
        lines = [line.strip() for line in key.splitlines()]
        return [key, *(line for line in lines if line and not line.startswith("-----"))]
    token = settings.github_token.get_secret_value().strip() if settings.github_token else ""
    if not token:
        raise ConfigError(
            "no GitHub token: set GITHUB_TOKEN (or THIRDSHIFT_GITHUB_TOKEN), or a GitHub App's "
            "THIRDSHIFT_GITHUB_APP_ID and THIRDSHIFT_GITHUB_APP_PRIVATE_KEY"
        )
    return [token]


@dataclass(frozen=True)
class GitHubAccess:
    """How a process reaches GitHub: the settings' credentials, the one scrubber and clock,
    and where the adapter's progress lines go."""

    settings: Settings
    clock: Clock
    scrub: Scrubber
    progress: Callable[[str], None]

    def credentials(self, owner: str, name: str) -> Credentials:
        """The credentials for ``owner/name``: a GitHub App's installation tokens when an App
        is configured (it wins over a token: it is the one whose pushes start CI), else the
        token."""
        settings = self.settings
        key = app_key(settings)
        if key is None or settings.github_app_id is None:
            token = credential_secrets(settings)[0]
            return Credentials(lambda: token, settings.github_login, None)
        tokens = InstallationTokens(
            settings.github_api_url,
            settings.github_app_id,
            key,
            owner,
            name,
            clock=self.clock,
            scrub=self.scrub,
            progress=self.progress,
        )
        # The installation first: its errors name the App's installation, the likeliest fault.
        installation = tokens.installation_id
        return Credentials(tokens, tokens.login(), installation, tokens.credential, tokens.close)

    @contextmanager
    def run_adapter(self, credentials: Credentials) -> Iterator[GitHub]:
        """The adapter of one Run, closed with its credentials as the Run ends: a daemon runs
        thousands, and each left open holds a connection until the garbage collector comes."""
        github = self.adapter(credentials)
        try:
            yield github
        finally:
            github.close()
            credentials.close()

    def adapter(self, credentials: Credentials) -> GitHub:
        """The GitHub adapter acting with ``credentials``, paced with every other adapter of
        this process."""
        return GitHub(
            self.settings.github_api_url,
            credentials.token,
            scrub=self.scrub,
            clock=self.clock,
            progress=self.progress,
            login=credentials.login,
            credential=credentials.words,
            pacer=process_pacer(self.settings, credentials.installation, self.clock),
        )

    def github(self, owner: str, name: str) -> GitHub:
        """The GitHub adapter acting for ``owner/name`` (a token ignores the repository; a
        GitHub App needs it to find its installation)."""
        return self.adapter(self.credentials(owner, name))


def pace_budget(settings: Settings) -> PaceBudget:
    return PaceBudget(
        requests_per_minute=settings.github_requests_per_minute,
        writes_per_minute=settings.github_writes_per_minute,
        writes_per_hour=settings.github_writes_per_hour,
    )


_PACERS: dict[tuple[object, ...], Pacer] = {}
_PACERS_LOCK = threading.Lock()


def process_pacer(settings: Settings, installation: int | None, clock: Clock) -> Pacer:
    """The one Pacer of this process for the identity GitHub counts its secondary limits by (a
    token, or one App installation, on one GitHub): every adapter of a daemon acting as it (its
    polls and each Run's) waits its turn in one queue. The daemon's clocks all keep the system's
    monotonic time; any other clock (a test's) paces on its own."""
    same_time: object = "system" if isinstance(clock, SystemClock) else id(clock)
    budget = pace_budget(settings)
    key = (settings.github_api_url, installation, budget, same_time)
    with _PACERS_LOCK:
        pacer = _PACERS.get(key)
        if pacer is None:
            pacer = _PACERS[key] = Pacer(budget, monotonic=clock.monotonic)
        return pacer
