"""One run of a CLI to its end, its output captured: the short runs beside a Session (a Harness
CLI's ``--version``, the doctor's test session and its network probe). ``run_sealed`` starts it
in the Agent sandbox as a Session's CLI is started, so what it proves (it starts, it answers) a
Session would find too; a Session itself runs under the process supervisor (``process``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from thirdshift.harnesses.agent_sandbox import AgentSandbox, SealedPaths


@dataclass(frozen=True)
class OneShot:
    """How a one-shot run ended: its exit status and all it printed."""

    exit_status: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def run_once(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, seconds: float) -> OneShot:
    """``argv`` run to its end in ``cwd``, stdin closed. Raises ``OSError`` when it cannot be
    started and ``subprocess.TimeoutExpired`` (having killed it) past ``seconds``."""
    done = subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=seconds,
        check=False,
    )
    return OneShot(done.returncode, done.stdout, done.stderr)


def run_sealed(
    sandbox: AgentSandbox,
    argv: Sequence[str],
    env: Mapping[str, str],
    paths: SealedPaths,
    *,
    seconds: float,
    egress: Path | None = None,
) -> OneShot:
    """``argv`` run once in ``sandbox``, sealed by ``paths`` and started in their Worktree, as a
    Session's CLI is; ``egress`` is the socket of its egress proxy (None: no network, when
    the network is sealed). Raises as ``run_once`` does."""
    wrapped, wrapped_env = sandbox.wrap(argv, env, paths, egress)
    return run_once(wrapped, env=wrapped_env, cwd=paths.worktree, seconds=seconds)
