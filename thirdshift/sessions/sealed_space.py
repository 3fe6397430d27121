"""Where a session's CLI runs: its sealed space. ``AgentSeal`` is how every session of this
thirdshift is sealed (the Agent sandbox, what it hides, the Session limits); ``SealedSpace`` is
one Run's seal for one Harness, with what a session needs of it while its CLI runs: the model
gateway's plan (adr/0038), the egress proxy (adr/0023, adr/0040), the cgroup watched against
the Session limits (adr/0039), and the CLI's version asked sealed, once per process."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from secrets import token_hex

from thirdshift.errors import ThirdshiftError
from thirdshift.git import own_git_dir
from thirdshift.harnesses import AgentSandbox, Harness, SealedPaths, install_dirs
from thirdshift.harnesses.egress import EgressProxy, Refusal
from thirdshift.harnesses.limits import (
    LimitHit,
    LimitWatch,
    SessionGroup,
    SessionGroups,
    SessionLimits,
    Unbounded,
    disk_use,
    group_name,
)
from thirdshift.harnesses.model_gateway import GatewayPlan, ModelGateway, ModelKeyInside
from thirdshift.harnesses.one_shot import run_sealed
from thirdshift.home import Home
from thirdshift.issue_url import RunRef
from thirdshift.network import EgressAllowlist

VERSION_SECONDS = 30.0

# A CLI's version, by its resolved executable, for the Harnesses whose stream does not say it:
# asked once per process, since it cannot change under a running thirdshift.
_versions: dict[str, str | None] = {}
_versions_lock = threading.Lock()


def _nowhere(_owner: str, _name: str) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class SealedSpace:
    """One session's seal: the Agent sandbox and the paths it seals (the Worktree, the Agent
    home, what stays hidden, the CLI's install kept readable), where its cgroup is made and
    the Session limits it is held to, and the hosts its repository lets it reach besides its
    model provider (``agent_network_allow``, adr/0023)."""

    sandbox: AgentSandbox
    paths: SealedPaths
    groups: SessionGroups = field(default_factory=Unbounded)
    limits: SessionLimits = field(default_factory=SessionLimits)
    network_allow: tuple[str, ...] = ()

    @property
    def worktree(self) -> Path:
        return self.paths.worktree

    def for_cli(self, executable: str, path: str | None) -> SealedSpace:
        """The same seal with ``executable``'s install readable (found on ``path``)."""
        return replace(self, paths=replace(self.paths, readable=install_dirs(executable, path)))

    def gateway_plan(self, harness: Harness, provider_env: Mapping[str, str]) -> GatewayPlan | None:
        """How the CLI runs with its model key outside the sandbox, behind the session's model
        gateway (adr/0038); None when it holds its key: the network is not sealed (an unsafe
        setting), or its credential cannot be kept outside and the user allowed that."""
        if not self.sandbox.network_sealed:
            return None
        try:
            return harness.behind_gateway(provider_env)
        except ModelKeyInside as error:
            if self.sandbox.agent_may_hold_key:
                return None
            raise ModelKeyInside(
                f"the {harness.name} Harness cannot start with its model key outside the "
                f"sandbox: {error}"
            ) from error

    @contextmanager
    def network(
        self,
        allowlist: EgressAllowlist,
        refused: Callable[[Refusal], None],
        failed: Callable[[str], None],
        plan: GatewayPlan | None,
    ) -> Iterator[Path | None]:
        """The socket of the session's egress proxy, with its model gateway when ``plan`` says
        the key is outside, while it runs (None: the sandbox leaves the agent on the host's
        network, or gives it none)."""
        if not self.sandbox.network_sealed:
            yield None
            return
        gateway = ModelGateway(plan.routes) if plan is not None else None
        try:
            proxy = EgressProxy(
                allowlist, on_refused=refused, on_failure=failed, gateway=gateway
            ).__enter__()
        except OSError as error:
            raise ThirdshiftError(
                f"the agent's egress proxy cannot be started ({error.strerror or error}); check "
                "that the temporary directory is writable"
            ) from error
        try:
            yield proxy.socket_path
        finally:
            proxy.close()

    @contextmanager
    def bounded(
        self, run_id: int, halt: threading.Event, ended: Callable[[LimitHit | None], None]
    ) -> Iterator[SessionGroup]:
        """The session's cgroup while its CLI runs, watched against its limits (a limit met
        sets ``halt``, and is handed to ``ended`` with the watch's end); removed, with all left
        in it, after."""
        # The Worktree's repository too: the agent writes it (its commits), so it is its disk.
        own = () if self.paths.git_dir is None else (self.paths.git_dir,)
        watched = (self.paths.worktree, *own, self.paths.agent_home)
        # Measured before the group is made: this scan has no cap, and an empty group left
        # waiting through it could be swept by another thirdshift's start.
        baseline = disk_use(watched)
        group = self.groups.make(group_name(run_id, token_hex(4)), self.limits)
        watch = LimitWatch(group, self.limits, watched, halt, baseline=baseline)
        try:
            with watch:
                yield group
        finally:
            ended(watch.hit)
            group.remove()

    def cli_version(self, harness: Harness, env: Mapping[str, str]) -> str | None:
        """The CLI's version from ``version_argv``, run sealed as its sessions are, once per
        process (None when its stream names it, or the CLI would not say)."""
        argv = harness.version_argv()
        if argv is None:
            return None
        key = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
        with _versions_lock:
            if key in _versions:
                return _versions[key]
        version = None
        try:
            done = run_sealed(self.sandbox, argv, env, self.paths, seconds=VERSION_SECONDS)
        except (OSError, subprocess.SubprocessError):
            pass  # a ledger line without a version; the session itself will say what is wrong
        else:
            if done.exit_status == 0:
                version = harness.parse_version(done.out)
        with _versions_lock:
            _versions.setdefault(key, version)
            return _versions[key]


@dataclass(frozen=True)
class AgentSeal:
    """How every session of this thirdshift is sealed, whatever its Run: the Agent sandbox,
    thirdshift's home (hidden, with ``hidden`` besides: the user's home), where each session's
    cgroup is made (the composition root's probe) and the Session limits (adr/0039), and
    ``agent_network_allow`` of a repository: hosts its sessions may reach besides the provider
    (adr/0023)."""

    sandbox: AgentSandbox
    home: Home
    hidden: tuple[Path, ...]
    groups: SessionGroups = field(default_factory=Unbounded)
    limits: SessionLimits = field(default_factory=SessionLimits)
    network_allow: Callable[[str, str], tuple[str, ...]] = field(default=_nowhere)

    def space(self, run_id: int, worktree: Path, ref: RunRef) -> SealedSpace:
        """The seal of Run ``run_id``'s sessions in ``worktree`` (no CLI's install readable
        yet: ``SealedSpace.for_cli``)."""
        paths = SealedPaths(
            worktree=worktree,
            clone=self.home.repos / ref.owner / ref.repo,
            git_dir=own_git_dir(worktree),
            agent_home=self.home.agent_home(ref.owner, ref.repo, run_id),
            hidden=(self.home.root, *self.hidden),
            scratch_bytes=self.limits.tmpfs_mb * 1024 * 1024,
        )
        return SealedSpace(
            self.sandbox, paths, self.groups, self.limits, self.network_allow(ref.owner, ref.repo)
        )
