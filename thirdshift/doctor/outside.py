"""The real Outside of ``thirdshift doctor``: it asks this machine what a Run would ask it, with
the functions a Run uses (``load_settings``, ``Store.open``, ``token_role``, ``probe``,
``check_home``), so the doctor and a Run never disagree. Built by the composition root, which
hands it the GitHub adapter of each repository's credentials.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from thirdshift.doctor.checks import Access, Database, WorkflowGrant
from thirdshift.errors import ThirdshiftError
from thirdshift.github import GitHub
from thirdshift.harnesses import SealedPaths, harness_named, install_dirs, probe
from thirdshift.harnesses.egress import EgressProxy, Refusal, socket_root
from thirdshift.harnesses.limits import probe_groups
from thirdshift.harnesses.model_gateway import ModelGateway, ModelKeyInside
from thirdshift.harnesses.one_shot import OneShot, run_once, run_sealed
from thirdshift.home import Home, check_home
from thirdshift.network import EgressAllowlist
from thirdshift.records import HookDelivery, Webhook
from thirdshift.runs import PERMISSIONS_THAT_PUSH, token_role
from thirdshift.settings import Settings, load_settings
from thirdshift.store import Store, redact_url

VERSION_SECONDS = 30
"""A ``--version`` that takes longer is hung (a CLI waiting on the network, say)."""
SESSION_SECONDS = 180
"""A test session asks the model once; past this, the provider is not answering."""
SESSION_PROMPT = (
    "This is a test by thirdshift doctor. Reply with the single word OK, and do nothing else."
)

GitHubFor = Callable[[Settings, tuple[str, str] | None], GitHub]
"""The GitHub adapter acting with the credentials for a repository (None: any, for a token)."""


class SystemOutside:
    """The machine as a Run sees it. ``environ`` is thirdshift's own environment; ``hidden``
    gives what the agent sandbox hides besides the home (the composition root's list)."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        github_for: GitHubFor,
        hidden: Callable[[Settings], tuple[Path, ...]],
        notification_targets: Callable[[Settings], tuple[str, ...]] = lambda _settings: (),
    ) -> None:
        self._notification_targets = notification_targets
        self._environ = environ
        self._github_for = github_for
        self._hidden = hidden
        self._adapters: dict[tuple[str, str] | None, GitHub] = {}

    def settings(self) -> Settings:
        return load_settings(self._environ)

    def database(self, settings: Settings) -> Database:
        url = settings.effective_database_url
        store = Store.open(url)
        try:
            return Database(redact_url(url), store.revision(), store.role())
        finally:
            store.close()

    def _github(self, settings: Settings, repository: tuple[str, str] | None) -> GitHub:
        # A GitHub App's installation depends on the account; a token's adapter serves all.
        key = repository if settings.github_app_id is not None else None
        if key not in self._adapters:
            self._adapters[key] = self._github_for(settings, repository)
        return self._adapters[key]

    def github_login(self, settings: Settings, repository: tuple[str, str] | None) -> str:
        return self._github(settings, repository).authenticated_login()

    def access(self, settings: Settings, owner: str, name: str) -> Access:
        github = self._github(settings, (owner, name))
        login = github.authenticated_login()
        role = token_role(github, owner, name, login)
        return Access(login, role, role in PERMISSIONS_THAT_PUSH)

    def label_exists(self, settings: Settings, owner: str, name: str, label: str) -> bool:
        return self._github(settings, (owner, name)).label_exists(owner, name, label)

    def workflow_grant(
        self, settings: Settings, repository: tuple[str, str] | None
    ) -> WorkflowGrant:
        github = self._github(settings, repository)
        granted = github.app_permissions()
        if granted is not None:
            level = granted.get("workflows")
            said = f"GitHub App {settings.github_app_id}'s installation grants " + (
                f"workflows: {level}" if level else "no workflows permission"
            )
            return WorkflowGrant(level == "write", said)
        scopes = github.token_scopes()
        if scopes is None:
            # A fine-grained token's permissions are not readable with it, nor a workflow's.
            return WorkflowGrant(
                None, "a fine-grained token or a workflow's, whose permissions GitHub does not show"
            )
        return WorkflowGrant("workflow" in scopes, f"its scopes: {', '.join(scopes) or 'none'}")

    def webhooks(self, settings: Settings, owner: str, name: str | None) -> tuple[Webhook, ...]:
        # An organisation's hooks are asked with a token only, which serves every owner.
        repository = (owner, name) if name is not None else None
        return self._github(settings, repository).webhooks(owner, name)

    def webhook_deliveries(
        self, settings: Settings, owner: str, name: str | None, hook_id: int, limit: int
    ) -> tuple[HookDelivery, ...]:
        repository = (owner, name) if name is not None else None
        return self._github(settings, repository).webhook_deliveries(owner, name, hook_id, limit)

    def which(self, program: str) -> str | None:
        return shutil.which(program, path=self._environ.get("PATH"))

    def version(self, argv: Sequence[str]) -> str:
        shown = " ".join([Path(argv[0]).name, *argv[1:]])
        return _first_line(
            shown, lambda: run_once(argv, env=self._environ, cwd=Path("/"), seconds=VERSION_SECONDS)
        )

    def sandbox(self, settings: Settings) -> str:
        found = probe(self._environ.get("PATH"), unsafe_without=False, unsafe_network=True)
        return found.bwrap or "bwrap"

    def session_groups(self, settings: Settings) -> str:
        return probe_groups().found

    def agent_network(self, settings: Settings) -> str:
        sandbox = probe(self._environ.get("PATH"), unsafe_without=False, unsafe_network=False)
        with (
            _Listener() as allowed,
            _Listener() as other,
            self._scratch(settings, sandbox.socat or "socat") as sealed,
        ):
            refused: list[Refusal] = []
            allowlist = EgressAllowlist.of([f"127.0.0.1:{allowed.port}"])
            with EgressProxy(allowlist, on_refused=refused.append) as proxy:
                try:
                    done = run_sealed(
                        sandbox,
                        [
                            *("/bin/sh", "-c", _NETWORK_PROBE, "doctor"),
                            *(sandbox.socat or "socat", str(other.port), str(allowed.port)),
                        ],
                        {"PATH": self._environ.get("PATH", "/usr/bin:/bin")},
                        sealed,
                        seconds=NETWORK_SECONDS,
                        egress=proxy.socket_path,
                    )
                except (OSError, subprocess.TimeoutExpired) as error:
                    raise ThirdshiftError(
                        f"the sealed network probe did not finish ({error}); run thirdshift "
                        "doctor again, and check that socat works"
                    ) from error
        return network_verdict(done.out, allowed.greeting, other.greeting, len(refused))

    def sealed_version(self, settings: Settings, harness: str) -> str:
        cli = harness_named(harness)
        # A --version needs no network: only whether the CLI starts sealed is asked here.
        sandbox = probe(
            self._environ.get("PATH"),
            unsafe_without=settings.unsafe_agent_without_sandbox,
            unsafe_network=True,
        )
        with self._scratch(settings, cli.executable) as sealed:
            return _first_line(
                f"{cli.executable} --version",
                lambda: run_sealed(
                    sandbox,
                    [cli.executable, "--version"],
                    cli.environment(self._environ),
                    sealed,
                    seconds=VERSION_SECONDS,
                ),
            )

    def model_key(self, settings: Settings, harness: str) -> str:
        own = settings.harness_args if harness == settings.harness else []
        options = next((v for k, v in settings.harness_options.items() if k == harness), [])
        cli = harness_named(harness, extra_args=[*own, *options])
        plan = cli.behind_gateway(cli.environment(self._environ))
        if not plan.routes:
            return "no key to keep: its provider takes none"
        reached = ", ".join(sorted({route.upstream for route in plan.routes}))
        return f"kept outside the sandbox by the model gateway (to {reached})"

    @contextmanager
    def _scratch(self, settings: Settings, executable: str) -> Iterator[SealedPaths]:
        """A throwaway Worktree, clone and agent home under the home, laid out as a Run's, so
        the seal is the one a Session gets (the home and the user's home hidden, the CLI's
        install readable); removed afterwards."""
        try:
            settings.home.mkdir(parents=True, exist_ok=True)
            scratch_dir = tempfile.TemporaryDirectory(prefix="doctor-", dir=settings.home)
        except OSError as error:
            raise ThirdshiftError(
                f"{settings.home} cannot be written ({error.strerror}); check THIRDSHIFT_HOME "
                "and its permissions"
            ) from error
        with scratch_dir as scratch:
            root = Path(scratch)
            sealed = SealedPaths(
                worktree=root / "worktree",
                clone=root / "clone",
                agent_home=root / "agent-home",
                hidden=(settings.home, socket_root(), *self._hidden(settings)),
                readable=install_dirs(executable, self._environ.get("PATH")),
            )
            for directory in (sealed.worktree, sealed.clone, sealed.agent_home):
                directory.mkdir()
            yield sealed

    def notification_targets(self, settings: Settings) -> tuple[str, ...]:
        return self._notification_targets(settings)

    def test_session(self, settings: Settings, harness: str) -> str:
        own = settings.harness_args if harness == settings.harness else []
        options = next((v for k, v in settings.harness_options.items() if k == harness), [])
        cli = harness_named(harness, extra_args=[*own, *options])
        sandbox = probe(
            self._environ.get("PATH"),
            unsafe_without=settings.unsafe_agent_without_sandbox,
            unsafe_network=settings.unsafe_agent_network,
        )
        provider_env = cli.environment(self._environ)
        # As a session's: the key outside, behind the gateway, when the network is sealed.
        plan = None
        if sandbox.network_sealed:
            try:
                plan = cli.behind_gateway(provider_env)
            except ModelKeyInside:
                if not settings.unsafe_agent_holds_model_key:
                    raise
        with (
            self._scratch(settings, cli.executable) as sealed,
            EgressProxy(
                EgressAllowlist.of(
                    cli.provider_endpoints(provider_env), settings.agent_network_allow
                ),
                gateway=ModelGateway(plan.routes) if plan is not None else None,
            ) as proxy,
        ):
            home = cli.private_home(self._environ, sealed.agent_home, login=plan is None)
            argv = cli.argv(SESSION_PROMPT, model=settings.model_for(harness), resume_id=None)
            env = {**provider_env, **home}
            if plan is not None:
                env, argv = plan.environment(env), plan.argv(argv)
            started = time.monotonic()
            try:
                done = run_sealed(
                    sandbox,
                    argv,
                    env,
                    sealed,
                    seconds=SESSION_SECONDS,
                    egress=proxy.socket_path if sandbox.network_sealed else None,
                )
            except subprocess.TimeoutExpired as error:
                raise ThirdshiftError(
                    f"a test session of {harness} did not end within {SESSION_SECONDS}s; check "
                    "that its model provider is reachable from here"
                ) from error
            except OSError as error:
                raise ThirdshiftError(
                    f"a test session of {harness} cannot be started ({error.strerror}); "
                    "reinstall it"
                ) from error
            took = time.monotonic() - started
        reader = cli.reader()
        for line in done.stdout.splitlines():
            reader.feed(line)
        outcome = reader.finish(done.exit_status, stopped_after_result=False)
        if outcome.failed:
            said = done.err.strip().splitlines()
            why = outcome.failure_cause or (said[-1] if said else f"exit {done.exit_status}")
            raise ThirdshiftError(
                f"a test session of {harness} failed: {why}; check its model provider's key, "
                f"quota and network (the variables {harness} reads), then run doctor --session "
                "again"
            )
        answer = " ".join((outcome.final_message or "").split())[:80] or "no message"
        return f"answered in {took:.0f}s: {answer!r} ({outcome.usage.describe()})"

    def free_disk_mb(self, settings: Settings) -> int:
        home = Home(settings.home)
        check_home(
            home, database_dir=settings.sqlite_directory, min_free_mb=settings.min_free_disk_mb
        )
        return shutil.disk_usage(home.root).free // (1024 * 1024)


NETWORK_SECONDS = 60
# Run sealed, behind a proxy that allows only the first listener: a direct connection to the
# other one on the host's loopback, the same through the proxy, and the metadata address must
# all fail; the allowed one must answer. Each prints what it read.
_NETWORK_PROBE = """
socat=$1 other=$2 allowed=$3
via() { "$socat" -T5 -u "PROXY:127.0.0.1:$1,proxyport=3128,connect-timeout=5" - 2>/dev/null; }
printf 'direct:%s\\n' "$("$socat" -T5 -u "TCP:127.0.0.1:$other,connect-timeout=5" - 2>/dev/null)"
printf 'denied:%s\\n' "$(via "127.0.0.1:$other")"
printf 'metadata:%s\\n' "$(via 169.254.169.254:80)"
printf 'allowed:%s\\n' "$(via "127.0.0.1:$allowed")"
"""


def network_verdict(output: str, allowed: str, other: str, refusals: int) -> str:
    """What the sealed probe proved, or a ThirdshiftError naming what got through or what
    did not."""
    seen = dict(line.partition(":")[::2] for line in output.splitlines() if ":" in line)
    leaks = [
        what
        for what, key in (
            ("a service on the host's loopback, directly", "direct"),
            ("a loopback port not on the allowlist, through the proxy", "denied"),
            ("169.254.169.254 through the proxy", "metadata"),
        )
        if seen.get(key, "").strip()
    ]
    if leaks or other in output:
        raise ThirdshiftError(
            f"a sealed process reached {'; '.join(leaks) or 'the host'}; the agent's network is "
            "not sealed here: report this, and meanwhile keep strangers' issues away"
        )
    if seen.get("allowed", "").strip() != allowed:
        raise ThirdshiftError(
            "a sealed process could not reach an allowed host through the egress proxy; check "
            "that socat works inside bubblewrap (apt-get install socat), or, knowing the agent "
            "then reaches this host's network, set unsafe_agent_network = true"
        )
    return (
        "a sealed process reached an allowed host through the egress proxy and was refused "
        f"loopback services, a host not allowed and the metadata address ({refusals} refusals)"
    )


class _Listener:
    """A port on 127.0.0.1 that greets every connection with a word of its own."""

    def __init__(self) -> None:
        self.greeting = f"thirdshift-doctor-{secrets.token_hex(8)}"
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(8)
        self._socket.settimeout(0.2)
        self.port = int(self._socket.getsockname()[1])
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> _Listener:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join(5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                connection.sendall(self.greeting.encode() + b"\n")


def _first_line(shown: str, run: Callable[[], OneShot]) -> str:
    """The first line the command ``shown`` prints when ``run``, or a ThirdshiftError naming it
    and the last line of its stderr."""
    try:
        done = run()
    except subprocess.TimeoutExpired as error:
        raise ThirdshiftError(
            f"`{shown}` printed nothing within {VERSION_SECONDS}s; run it by hand to see why"
        ) from error
    except OSError as error:
        raise ThirdshiftError(
            f"`{shown}` cannot be started ({error.strerror}); reinstall it"
        ) from error
    lines = done.out.strip().splitlines()
    if done.exit_status != 0 or not lines:
        said = done.err.strip().splitlines()
        why = said[-1] if said else f"exit {done.exit_status}"
        raise ThirdshiftError(
            f"`{shown}` failed ({why}); run it by hand to see why, and reinstall it"
        )
    return lines[0]
