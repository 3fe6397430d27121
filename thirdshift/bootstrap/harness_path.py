"""Where the Harness CLIs are looked for: the ``harness_paths`` setting, then the
``node_modules/.bin`` of the project whose virtual environment runs thirdshift (where
``scripts/install`` puts the pinned CLIs), then PATH. A newcomer who runs
``.venv/bin/thirdshift`` without ``node_modules/.bin`` on PATH gets the CLIs the install put in
place, not a daemon that waits forever for one it cannot find.

The order is written into the PATH of the environment every part is built from (thirdshift's
own and the agent's), so the pre-flights, the doctor, the sandbox's readable directories and
the session's own ``exec`` all find the same program."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from thirdshift.errors import HarnessMissing, ThirdshiftError
from thirdshift.harness_registry import harness_entry, harness_not_found
from thirdshift.settings import Settings, load_settings


def installed_cli_dir(prefix: str | None = None, base_prefix: str | None = None) -> Path | None:
    """``node_modules/.bin`` beside the virtual environment this interpreter runs in, when
    there is one (a ``.venv`` of a checkout); None outside a virtual environment."""
    prefix = sys.prefix if prefix is None else prefix
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    if Path(prefix) == Path(base_prefix):
        return None
    found = Path(prefix).parent / "node_modules" / ".bin"
    return found if found.is_dir() else None


def search_path(first: Sequence[Path | None], path: str | None) -> str:
    """PATH with the directories of ``first`` (None left out) ahead of it, each once."""
    entries = [str(d) for d in first if d is not None]
    entries += [entry for entry in (path or "").split(os.pathsep) if entry]
    return os.pathsep.join(dict.fromkeys(entries))


def with_harness_paths(environ: Mapping[str, str], harness_paths: Sequence[Path]) -> dict[str, str]:
    """``environ`` whose PATH looks in ``harness_paths``, then beside thirdshift's install,
    first. Applying it twice changes nothing more."""
    path = search_path([*harness_paths, installed_cli_dir()], environ.get("PATH"))
    return {**environ, "PATH": path}


def doctor_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the doctor checks with: the settings' harness_paths when the settings
    can be read (when they cannot, the doctor's settings check says why)."""
    try:
        paths: Sequence[Path] = load_settings(environ).harness_paths
    except ThirdshiftError:
        paths = ()
    return with_harness_paths(environ, paths)


def check_harnesses(settings: Settings, environ: Mapping[str, str]) -> None:
    """Every Harness a daemon (or the demo) may run, found on ``environ``'s PATH; else
    HarnessMissing naming the first one missing and the fix."""
    for name in daemon_harnesses(settings):
        problem = daemon_harness_problem(settings, environ, name)
        if problem is not None:
            raise HarnessMissing(problem)


def daemon_harnesses(settings: Settings) -> list[str]:
    """The Harnesses a daemon's Runs may run: their own, then each fallback."""
    return [settings.harness, *settings.fallback_harnesses]


def daemon_harness_problem(settings: Settings, environ: Mapping[str, str], name: str) -> str | None:
    """Why the daemon's Harness ``name`` cannot be found, with the fix; None when it is there."""
    if name == settings.harness:
        return harness_problem(name, environ, role="the Runs' Harness")
    return harness_problem(
        name,
        environ,
        role="a fallback in harness_fallbacks",
        other="take it out of harness_fallbacks",
    )


def harness_problem(
    name: str,
    environ: Mapping[str, str],
    *,
    role: str = "the harness setting",
    other: str = "choose another with --harness",
    settable: bool = True,
) -> str | None:
    """Why the Harness ``name`` cannot be found on ``environ``'s PATH, with the fix; None when
    it is there."""
    entry = harness_entry(name)
    if shutil.which(entry.executable, path=environ.get("PATH")) is None:
        return harness_not_found(entry, role, other, settable=settable)
    return None


def check_demo_harness(name: str, environ: Mapping[str, str]) -> None:
    """The demo's Harness, looked for before any of its servers starts."""
    problem = harness_problem(
        name,
        with_harness_paths(environ, ()),
        role="the demo's --harness",
        settable=False,  # the demo's settings are its own: it reads no harness_paths
    )
    if problem is not None:
        raise HarnessMissing(problem)
