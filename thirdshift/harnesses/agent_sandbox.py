"""The Agent sandbox: every Harness CLI, and everything it starts, runs sealed in bubblewrap.

The agent reads text strangers wrote and runs whatever it decides, as thirdshift's own user.
Sealed, it sees:

- its own PID namespace with a fresh ``/proc``: no other process (thirdshift's included, with
  ``GITHUB_TOKEN`` in its environment) is visible, and the whole namespace dies with the
  thirdshift process that started it (``--die-with-parent``; ``kill -9`` included);
- the machine's filesystem read-only, with thirdshift's home (database, settings, logs, other
  Worktrees), the user's home and ``/tmp`` replaced by empty directories;
- writable: its own Worktree, the Worktree's own repository (its objects and refs: a commit
  needs them), and a private home made for the Run (the Harness's config and transcripts, so a
  native Resume finds its session); that repository's ``config`` stays read-only, so nothing the
  agent writes there can redirect thirdshift's pushes; the managed clone, whose objects it
  borrows, is read-only, so no agent can move another Run's branch (adr/0042);
- a network namespace of its own (``--unshare-net``): a loopback of its own and nothing else.
  The session's one way out is its egress proxy (``egress``), reached through a Unix socket
  bound in at ``EGRESS_SOCKET``; a socat bridge inside listens on the namespace's loopback, so
  the CLI uses ordinary ``HTTPS_PROXY``. PostgreSQL, the status page and every other service on
  the host's loopback or network (abstract Unix sockets too: they belong to a network
  namespace) are out of reach, and so is DNS.

When bubblewrap cannot make the sandbox (not installed, no user namespaces: ``userns`` names the
cause and its fix), no Session starts, unless the user opts out with the setting
``unsafe_agent_without_sandbox``, which runs every agent unsealed. When it cannot seal the
network (no network namespace, no socat), no Session starts either, unless
``unsafe_agent_network`` lets the agent share the host's network. See adr/0009 and adr/0023.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses.userns import (
    APPARMOR_RESTRICT,
    MAX_USER_NAMESPACES,
    UNPRIVILEGED_CLONE,
    UsernsSettings,
    refusal,
)

BWRAP = "bwrap"
SEALING = (
    "--die-with-parent",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--cap-drop",
    "ALL",
)
"""Every sandbox: a user namespace with no capability (run as root, bubblewrap would otherwise
keep them all, and the agent could unmount what hides thirdshift's home), its own PID and IPC
namespaces, and death with thirdshift."""
SOCAT = "socat"
EGRESS_SOCKET = "/run/thirdshift-egress.sock"
"""Where the session's egress proxy is found inside the sandbox (/run is the agent's own)."""
PROXY_PORT = 3128
"""The bridge's port on the namespace's own loopback."""
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
# The bridge starts, the CLI waits until it listens (/proc/net/tcp shows this namespace's
# sockets: 0100007F:0C38 is 127.0.0.1:3128, state 0A is LISTEN), then the CLI replaces the
# shell, with the PATH it was given. grep and sleep are looked for where the system keeps them
# too, whatever that PATH holds. socat's own complaints stay out of the CLI's stderr.
_BRIDGE = (
    'given_path="$PATH"; PATH="$PATH:/usr/bin:/bin"\n'
    '"$1" TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay UNIX-CONNECT:{socket} '
    "</dev/null >/dev/null 2>&1 &\n"
    "shift\n"
    "tries=0\n"
    "pause=0.01\n"
    "until grep -q ' 0100007F:{hex_port} 00000000:0000 0A ' /proc/net/tcp; do\n"
    "  tries=$((tries + 1))\n"
    '  if [ "$tries" -gt 210 ]; then\n'
    "    echo 'thirdshift: the agent network bridge (socat) did not start' >&2; exit 125\n"
    "  fi\n"
    # Quick at first; then slower, so that on a busy machine the looking does not keep socat
    # from starting (each look is two processes): about ten seconds in all.
    '  [ "$tries" -gt 10 ] && pause=0.05\n'
    '  sleep "$pause"\n'
    "done\n"
    'PATH="$given_path"\n'
    'exec "$@"\n'
).format(port=PROXY_PORT, socket=EGRESS_SOCKET, hex_port=f"{PROXY_PORT:04X}")
_PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
_BYPASS_VARIABLES = ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy")


class AgentSandboxUnavailable(ThirdshiftError):
    """bubblewrap cannot seal the agent here; the message says why and how to fix it."""


@dataclass(frozen=True)
class SealedPaths:
    """What one Run's agent may write, and what must stay hidden from it."""

    worktree: Path
    clone: Path
    """The managed clone, whose objects the Worktree's repository borrows: read-only."""
    agent_home: Path
    """The Run's private home: the Harness's config and transcripts."""
    hidden: tuple[Path, ...]
    """Directories replaced by empty ones (thirdshift's home, the user's home), and files that
    read as empty (a GitHub App's key)."""
    readable: tuple[Path, ...] = ()
    """Directories under a hidden one that must stay readable (the Harness CLI's install)."""
    git_dir: Path | None = None
    """The Worktree's own repository (its common git dir, adr/0042): writable, but its
    ``config``."""
    scratch_bytes: int | None = None
    """The size of each of /tmp, /var/tmp and /run inside (``session_tmpfs_mb``); None leaves
    bubblewrap's default, half the host's memory each."""


@dataclass(frozen=True)
class AgentSandbox:
    """How Harness CLIs are started: ``sealed`` (bubblewrap at ``bwrap``) or not at all sealed,
    which only the unsafe setting allows; sealed, with a network of its own (``socat`` the
    bridge to its egress proxy) or, only by ``unsafe_agent_network``, the host's."""

    sealed: bool
    bwrap: str | None = None
    socat: str | None = None
    """Set when every session gets its own network namespace and an egress proxy."""
    agent_may_hold_key: bool = False
    """Whether a Harness whose credential cannot be kept behind the model gateway may start
    with it inside (``unsafe_agent_holds_model_key``, adr/0038)."""

    @property
    def network_sealed(self) -> bool:
        return self.sealed and self.socat is not None

    @property
    def mode(self) -> str:
        """A word for ``thirdshift config`` and the Run's first lines."""
        if not self.sealed:
            return "none (unsafe_agent_without_sandbox)"
        if not self.network_sealed:
            return "bubblewrap, on the host's network (unsafe_agent_network)"
        return "bubblewrap, network sealed (egress proxy)"

    def wrap(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        paths: SealedPaths,
        egress: Path | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that start ``argv`` inside the sandbox (unchanged, but for
        HOME, when unsealed). With the network sealed, ``egress`` is the socket of the
        session's egress proxy; without it the process has no network at all (a ``--version``
        needs none)."""
        environ = {**env, "HOME": str(paths.agent_home)}
        if not self.sealed or self.bwrap is None:
            return list(argv), environ
        options = bwrap_options(paths)
        if not self.network_sealed or self.socat is None:
            return [self.bwrap, *options, "--", *argv], environ
        options += ["--unshare-net"]
        for variable in (*_PROXY_VARIABLES, *_BYPASS_VARIABLES):
            environ.pop(variable, None)
        if egress is None:
            return [self.bwrap, *options, "--", *argv], environ
        options += ["--ro-bind", str(egress), EGRESS_SOCKET]
        environ.update(dict.fromkeys(_PROXY_VARIABLES, PROXY_URL))
        bridge = ["/bin/sh", "-c", _BRIDGE, "thirdshift-bridge", self.socat]
        return [self.bwrap, *options, "--", *bridge, *argv], environ


def bwrap_options(paths: SealedPaths) -> list[str]:
    """bubblewrap's options for ``paths``, in the order they must be applied: later mounts go
    over earlier ones, so the hidden directories are emptied before what is writable inside
    them is bound back."""
    options = [
        *SEALING,
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    # Empty and private: temporary files, and the sockets of the machine's services (D-Bus,
    # ssh-agent, docker, a database reached by peer authentication) under /run.
    # Sized: tmpfs pages belong to no process, so an unsized one could take the host's memory
    # (they are charged to the session's cgroup too, adr/0039).
    size = [] if paths.scratch_bytes is None else ["--size", str(paths.scratch_bytes)]
    for scratch in ("/tmp", "/var/tmp", "/run"):  # noqa: S108 (the agent's own, empty)
        if Path(scratch).is_dir() and not Path(scratch).is_symlink():
            options += [*size, "--tmpfs", scratch]
    # Name resolution often lives under /run (systemd-resolved): the agent keeps the network.
    resolver = Path(os.path.realpath("/etc/resolv.conf"))
    if resolver.is_relative_to("/run") and resolver.exists():
        options += ["--ro-bind", str(resolver), str(resolver)]
    for hidden in _outermost(paths.hidden):
        options += ["--tmpfs", str(hidden)]
    for readable in paths.readable:
        if readable.exists():
            options += ["--ro-bind", str(readable), str(readable)]
    # The clone only to read (the Worktree's repository borrows its objects): no session can
    # move another Run's branch or write what another Run's git reads (adr/0042).
    options += ["--ro-bind", str(paths.clone), str(paths.clone)]
    own = () if paths.git_dir is None else (paths.git_dir,)
    for writable in (paths.worktree, *own, paths.agent_home):
        options += ["--bind", str(writable), str(writable)]
    for git_dir in own:
        config = git_dir / "config"
        if config.exists():
            options += ["--ro-bind", str(config), str(config)]
    # A hidden file (a GitHub App's key, say) reads as empty; applied last, so it holds
    # wherever the file lies.
    for secret in _hidden_files(paths.hidden):
        options += ["--ro-bind", os.devnull, str(secret)]
    options += ["--chdir", str(paths.worktree)]
    return options


def _hidden_files(paths: Sequence[Path]) -> list[Path]:
    """The hidden paths that are files (links resolved), each once."""
    return sorted({Path(os.path.realpath(p)) for p in paths if str(p) and Path(p).is_file()})


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The hidden directories that exist (bubblewrap cannot make a mount point on the read-only
    root), each once, a directory inside another left out."""
    resolved = sorted(
        {Path(os.path.realpath(p)) for p in paths if str(p) not in ("", "/") and Path(p).is_dir()}
    )
    kept: list[Path] = []
    for path in resolved:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept


def install_dirs(executable: str, path_variable: str | None) -> tuple[Path, ...]:
    """Where a Harness CLI is installed, to stay readable if it lies in a hidden directory: the
    directory it is found in on PATH and, through its links, the package that holds it (the
    ``node_modules`` it is in, for an npm-installed CLI)."""
    found = shutil.which(executable, path=path_variable)
    if found is None:
        return ()
    dirs = {Path(found).parent}
    real = Path(os.path.realpath(found))
    dirs.add(real.parent)
    for parent in real.parents:
        if parent.name == "node_modules":
            dirs.add(parent)
            break
    return tuple(sorted(dirs))


def probe(
    path_variable: str | None, *, unsafe_without: bool = False, unsafe_network: bool = False
) -> AgentSandbox:
    """The sandbox agents run in: none at all when ``unsafe_without`` (the user opted out);
    else bubblewrap, found on ``path_variable`` (the PATH the composition root was given), once
    it has sealed a trivial command here, with a network of its own unless ``unsafe_network``;
    else ``AgentSandboxUnavailable`` naming the cause and the fix."""
    if unsafe_without:
        return AgentSandbox(sealed=False)
    program = shutil.which(BWRAP, path=path_variable)
    problem: str | None = None
    if program is None:
        problem = (
            "bubblewrap (bwrap) is not installed; install it (Debian: apt-get install bubblewrap)"
        )
    else:
        problem = _sealing_problem(program)
    if problem is not None or program is None:
        raise AgentSandboxUnavailable(
            f"the agent sandbox cannot be made: {problem}; or, knowing the agent can then read "
            "thirdshift's token, set unsafe_agent_without_sandbox = true"
        )
    if unsafe_network:
        return AgentSandbox(sealed=True, bwrap=program)
    return AgentSandbox(sealed=True, bwrap=program, socat=network_bridge(program, path_variable))


def network_bridge(program: str, path_variable: str | None) -> str:
    """socat, once bubblewrap has made a network namespace here and socat is found; else
    ``AgentSandboxUnavailable`` naming the cause and the fix."""
    socat = shutil.which(SOCAT, path=path_variable)
    problem: str | None
    if socat is None:
        problem = "socat (the bridge to the egress proxy) is not installed; install it (Debian: "
        problem += "apt-get install socat)"
    else:
        problem = _sealing_problem(program, "--unshare-net")
    if problem is None and socat is not None:
        return socat
    raise AgentSandboxUnavailable(
        f"the agent's network cannot be sealed: {problem}; or, knowing the agent can then reach "
        "every service on this host's network (the database, the status page), set "
        "unsafe_agent_network = true"
    )


def _sealing_problem(program: str, *extra: str) -> str | None:
    """Why ``program`` cannot seal a trivial command here (with ``extra`` options), or None."""
    try:
        done = subprocess.run(
            [
                program,
                *SEALING,
                *extra,
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--",
                "cat",
                "/proc/self/status",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{program} cannot be run ({exc})"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        what = "a network namespace" if extra else "a process"
        why = refusal(done.stderr, _userns_settings(), os.path.realpath(program))
        return f"{program} cannot seal {what} here ({said or f'exit {done.returncode}'}): {why}"
    if not _capabilities_dropped(done.stdout):
        return f"{program} left capabilities to the sealed process; use bubblewrap 0.4 or newer"
    return None


def _userns_settings() -> UsernsSettings:
    """What this kernel's user-namespace settings read (None where a file is missing)."""
    return UsernsSettings(
        apparmor_restrict=_read_setting(APPARMOR_RESTRICT),
        unprivileged_clone=_read_setting(UNPRIVILEGED_CLONE),
        max_user_namespaces=_read_setting(MAX_USER_NAMESPACES),
    )


def _read_setting(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _capabilities_dropped(status: str) -> bool:
    """Whether /proc/self/status, as the sealed process saw it, shows no effective capability."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split(":", 1)[1].strip(), 16) == 0
    return False
