"""A GitHub App's installation tokens, minted by thirdshift itself and renewed before they end.

An installation token lasts an hour; a Run (a session's four hours, then CI) outlasts it. A
token minted once, as ``actions/create-github-app-token`` does, would be refused half-way,
mid-push or mid-salvage. So with the App's id and private key thirdshift signs its own JSON Web
Token, asks GitHub for the installation that covers the repository, and mints installation
tokens from it as it needs them: every request and every git command asks
:class:`InstallationTokens` for the current one, which is renewed once less than
:func:`renew_at`'s margin is left.

PyGithub makes the JSON Web Tokens (``Auth.AppAuth``, with the key loaded once per process: PyJWT
would load and check the RSA key again for every token, tens of milliseconds of CPU each) and
the calls (``GithubIntegration``); the retry and rate-limit rules are the adapter's own
(``requests.Calls``). The private key stays in this process: never in argv, a URL, the agent's
environment or git's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

import jwt
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from github import Auth, GithubIntegration

from thirdshift.clock import Clock
from thirdshift.errors import ConfigError, GitHubError
from thirdshift.github.requests import Calls, Credential, Request

T = TypeVar("T")

RENEW_MARGIN = timedelta(minutes=10)
"""A token is renewed when this little is left of it (or half its life, if that is less)."""


def renew_at(issued: datetime, expires: datetime, margin: timedelta = RENEW_MARGIN) -> datetime:
    """When a token issued at ``issued`` and ending at ``expires`` is renewed: ``margin``
    before its end, or half-way through a life shorter than twice the margin. A request or a
    push that starts before then finishes while the token still holds."""
    return expires - min(margin, (expires - issued) / 2)


def check_private_key(text: str) -> None:
    """Raise :class:`ConfigError` unless ``text`` is an RSA private key in PEM, as GitHub
    gives an App's key; the message never quotes the key."""
    _private_key(text)


def _signer(text: str) -> Callable[[dict[str, str | int]], str | bytes]:
    """Signs a JSON Web Token's claims with the App's key (RS256, as GitHub requires)."""
    key = _private_key(text)
    return lambda claims: jwt.encode(claims, key=key, algorithm="RS256")


@functools.lru_cache(maxsize=4)
def _private_key(text: str) -> RSAPrivateKey:
    """The RSA key ``text`` holds, loaded (and checked) once per process; a ConfigError naming
    the fix otherwise."""
    try:
        key = load_pem_private_key(text.encode(), password=None)
    except (ValueError, TypeError) as error:
        raise ConfigError(
            "the GitHub App's private key (THIRDSHIFT_GITHUB_APP_PRIVATE_KEY, or the file "
            "github_app_private_key_file names) is not a PEM private key; give the whole .pem "
            "file GitHub generated for the App, its BEGIN and END lines included"
        ) from error
    if not isinstance(key, RSAPrivateKey):
        raise ConfigError(
            "the GitHub App's private key is not an RSA key; GitHub signs App tokens with RSA: "
            "generate a private key in the App's settings and give that file"
        )
    return key


class InstallationTokens:
    """The current installation token of ``app_id`` for the installation that covers
    ``owner/name``; call it for the token. One lock: the Run's threads (its requests, its git
    commands) share one token and renew it once."""

    def __init__(
        self,
        api_url: str,
        app_id: int,
        private_key: str,
        owner: str,
        name: str,
        *,
        clock: Clock,
        scrub: Callable[[str], str],
        progress: Callable[[str], None] = lambda _: None,
        retries: int = 4,
        max_rate_limit_wait: float = 900.0,
    ) -> None:
        self._app_id = app_id
        self._owner = owner
        self._name = name
        self._clock = clock
        self._integration = GithubIntegration(
            base_url=api_url.rstrip("/"),
            auth=Auth.AppAuth(app_id, sign_func=_signer(private_key)),
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        self._calls = Calls(
            api_url,
            scrub=scrub,
            progress=progress,
            clock=clock,
            retries=retries,
            max_rate_limit_wait=max_rate_limit_wait,
        )
        self._lock = threading.Lock()
        self._installation: int | None = None
        self._slug: str | None = None
        self._progress = progress
        self._token = ""
        self._permissions: dict[str, str] = {}
        self._expires = self._renew = clock.now()

    def __call__(self) -> str:
        """The installation token, minted now if there is none yet or it is due for renewal.
        A renewal that fails while the current token still holds keeps that token (and says
        so): a salvage push in the last minutes of a token must not be lost to a GitHub fault."""
        with self._lock:
            now = self._clock.now()
            if self._token and now < self._renew:
                return self._token
            try:
                self._mint()
            except (GitHubError, ConfigError) as error:
                if not self._token or self._clock.now() >= self._expires:
                    raise
                self._progress(
                    f"warning: could not renew GitHub App {self._app_id}'s installation "
                    f"token ({error}); the current one holds until {self._expires:%H:%M:%S} UTC"
                )
            return self._token

    def close(self) -> None:
        """Close the connection the tokens are minted over (the Run that used them ended)."""
        self._integration.close()

    def permissions(self) -> dict[str, str]:
        """What the current installation token may do, as GitHub granted it (minted now if
        there is none yet)."""
        self()
        with self._lock:
            return dict(self._permissions)

    @property
    def installation_id(self) -> int:
        with self._lock:
            return self._installation_id()

    @property
    def credential(self) -> Credential:
        """How messages name these tokens, and how their access is fixed."""
        return Credential.app(self._app_id)

    def login(self) -> str:
        """The App's bot login (``<slug>[bot]``): who its installation tokens act as. GitHub
        will not name an installation token's user, so it is asked of the App."""
        with self._lock:
            if self._slug is None:
                request = Request("GET", "/app", f"GitHub App {self._app_id}")
                integration = self._integration
                self._slug = self._asked(
                    request, lambda: str(integration.get_app().slug), repeatable=True
                )
            return f"{self._slug}[bot]"

    def _installation_id(self) -> int:
        if self._installation is None:
            owner, name = self._owner, self._name
            request = Request(
                "GET",
                f"/repos/{owner}/{name}/installation",
                f"GitHub App {self._app_id}'s installation on {owner}/{name}",
            )
            integration = self._integration
            self._installation = self._asked(
                request, lambda: int(integration.get_repo_installation(owner, name).id)
            )
        return self._installation

    def _mint(self) -> None:
        installation = self._installation_id()
        request = Request(
            "POST",
            f"/app/installations/{installation}/access_tokens",
            f"an installation token of GitHub App {self._app_id}",
        )
        issued = self._clock.now()
        integration = self._integration
        # Repeating is harmless: a second token is as good as the first.
        minted = self._asked(
            request, lambda: integration.get_access_token(installation), repeatable=True
        )
        expires = minted.expires_at
        if expires is None or expires <= issued:
            raise GitHubError(
                f"GitHub gave an installation token of GitHub App {self._app_id} that has "
                "already ended; check this machine's clock",
                None,
            )
        self._token = str(minted.token)
        granted = minted.permissions if isinstance(minted.permissions, dict) else {}
        self._permissions = {str(k): str(v) for k, v in granted.items()}
        self._expires = expires
        self._renew = renew_at(issued, expires)

    def _asked(
        self, request: Request, send: Callable[[], T], *, repeatable: bool | None = None
    ) -> T:
        """``send`` through the adapter's retry rules. What GitHub refuses becomes an error about
        the App, never a :class:`NotFound`: a caller reading "404" as an answer (a branch that
        is not there, a label already gone) must not take a token it could not get for one."""
        try:
            return self._calls.call(request, send, repeatable=repeatable)
        except GitHubError as error:
            if error.status == 401:
                raise ConfigError(
                    f"GitHub refused the token signed with GitHub App {self._app_id}'s private "
                    "key; check THIRDSHIFT_GITHUB_APP_ID and that the key is the App's current "
                    "one (and this machine's clock)"
                ) from error
            if error.status in (403, 404):
                raise ConfigError(
                    f"GitHub App {self._app_id} is not installed on {self._owner}/{self._name}, "
                    f"or cannot act there (GitHub answered {error.status} to {request}); "
                    "install the App there (the App's settings, Install App), and check that "
                    "the installation is not suspended"
                ) from error
            raise GitHubError(str(error), None) from error
