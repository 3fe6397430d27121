"""A person's git client against the GitHub stand-in: real git over HTTP, the token handed over
by a credential helper that reads it from the environment (never argv or a URL)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

_HELPER = (
    '!f() { test "$1" = get && echo username=x-access-token'
    ' && echo "password=$STAND_IN_TOKEN"; }; f'
)


def git_as(
    token: str | None,
    *args: str,
    cwd: Path,
    login: str = "tester",
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` in ``cwd`` as the user holding ``token`` (None: no credentials at all).
    With ``check``, a failure fails the test with git's stderr."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")
    }
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": login,
            "GIT_AUTHOR_EMAIL": f"{login}@example.com",
            "GIT_COMMITTER_NAME": login,
            "GIT_COMMITTER_EMAIL": f"{login}@example.com",
            "STAND_IN_TOKEN": token or "",
        }
    )
    helper = ["-c", "credential.helper="]
    if token is not None:
        helper += ["-c", f"credential.helper={_HELPER}"]
    done = subprocess.run(
        ["git", *helper, "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done
