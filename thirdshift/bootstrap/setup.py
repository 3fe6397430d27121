"""``thirdshift setup``: the configuration file written or edited in place, the repository's
labels made, then the doctor's checks, with the real GitHub adapter behind the labels."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from thirdshift.bootstrap.credentials import GitHubAccess, credential_secrets, reading_scrubber
from thirdshift.bootstrap.doctor import run_doctor
from thirdshift.clock import SystemClock
from thirdshift.doctor import Check
from thirdshift.errors import NotFound, ThirdshiftError
from thirdshift.settings import check_repository_name, config_file, load_settings
from thirdshift.setup import LabelWrites, make_labels, thirdshift_labels, with_repository


def run_setup(
    repository: str,
    *,
    environ: Mapping[str, str],
    report: Callable[[Check], None],
    progress: Callable[[str], None],
) -> list[Check]:
    """Make ``repository`` (OWNER/NAME) ready: the configuration file lists it (every other
    setting shown at its default), its labels exist, and the doctor's checks say what else is
    missing. Nothing is written before the credentials are there and GitHub shows the
    repository; a ThirdshiftError names what is wrong and the fix."""
    owner, name = check_repository_name(repository)
    settings = load_settings(environ)
    credential_secrets(settings)  # no token and no App: the ConfigError says what to set
    scrub = reading_scrubber(environ)

    def say(line: str) -> None:
        progress(scrub(line))

    github = GitHubAccess(settings, SystemClock(threading.Event()), scrub, say).github(owner, name)
    _check_repository(github, owner, name)
    path = config_file(environ)
    say(f"configuration {path}: {write_config(path, repository)}")
    for made in make_labels(github, owner, name, thirdshift_labels(settings)):
        state = "created" if made.outcome == "created" else "already there"
        say(f"label {made.label.name} of {owner}/{name}: {state}")
    return run_doctor([repository], environ=environ, report=report, progress=progress)


def _check_repository(github: LabelWrites, owner: str, name: str) -> None:
    try:
        github.repo(owner, name)
    except NotFound as error:
        raise ThirdshiftError(
            f"GitHub shows no repository {owner}/{name} to thirdshift's credentials; check the "
            "name, and that the token (or the GitHub App's installation) may see it"
        ) from error


def write_config(path: Path, repository: str) -> str:
    """Write the configuration file at ``path`` listing ``repository`` (or edit it in place);
    says what it did: ``written``, ``updated`` or ``unchanged``. The new text replaces the
    old in one step, so a failure leaves the old file whole."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else None
    except OSError as error:
        raise ThirdshiftError(f"cannot read {path}: {error.strerror}") from error
    new = with_repository(old, repository, path)
    if new == old:
        return "unchanged"
    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(new)
        if old is not None:
            os.chmod(temporary, path.stat().st_mode & 0o777)
        os.replace(temporary, path)
    except OSError as error:
        if temporary is not None:  # a half-written copy is no one's file: leave none behind
            Path(temporary).unlink(missing_ok=True)
        raise ThirdshiftError(
            f"cannot write the configuration file {path}: {error.strerror}; make its directory "
            "writable, or set THIRDSHIFT_HOME to a directory you can write"
        ) from error
    return "written" if old is None else "updated"
