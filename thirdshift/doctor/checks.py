"""The checks of ``thirdshift doctor``: pure functions over what the private ``_Outside`` seam
finds on this machine, each giving one frozen ``Check``.

Every check runs whatever the others found: a failure never hides the rest. Only a check that
cannot run without an earlier one (the database without the settings, a repository's labels
without its permission) is skipped, saying why. A message of thirdshift's own (a
``ThirdshiftError``) says the problem, then after its first ``"; "`` the fix: the check keeps
the two apart.

A little over 500 lines: one pure function per check, read side by side so their messages stay
alike; the probing they judge lives behind ``_Outside`` elsewhere. The webhook lines, which read
several hooks and their deliveries, are judged in ``webhooks``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

# Check and split_fix are named from here too (re-exported), as before they moved.
from thirdshift.doctor.check import Check as Check
from thirdshift.doctor.check import skipped as _skipped
from thirdshift.doctor.check import split_fix as split_fix
from thirdshift.doctor.webhooks import HookReader, check_webhooks
from thirdshift.errors import NotFound, ThirdshiftError
from thirdshift.harness_registry import find_harness, harness_not_found
from thirdshift.records import DatabaseRole
from thirdshift.settings import Settings, check_repository_name

MIN_GIT = (2, 36)
"""The oldest git thirdshift's worktrees and merges are tested with (README, set-up)."""


@dataclass(frozen=True)
class Database:
    """The database as opened: its URL with any password hidden, its Alembic revision, and
    the role thirdshift connects as (None on SQLite)."""

    shown_url: str
    revision: str | None
    role: DatabaseRole | None = None


@dataclass(frozen=True)
class Access:
    """The token's user on one repository: its login, its role, and whether that role pushes."""

    login: str
    role: str
    pushes: bool


@dataclass(frozen=True)
class WorkflowGrant:
    """Whether the credentials may write workflow files, as far as GitHub says: ``may_write``
    is None when it does not say (a fine-grained token, a workflow's ``GITHUB_TOKEN``), and
    ``said`` how it was found out."""

    may_write: bool | None
    said: str


class _Outside(HookReader, Protocol):
    """What the checks need from the machine. Each method raises a ``ThirdshiftError`` whose
    message names the problem and the fix; nothing else escapes."""

    def settings(self) -> Settings:
        """The settings in force (file and environment); ConfigError naming the key."""
        ...

    def database(self, settings: Settings) -> Database:
        """Open the database (migrating it, as every command does) and read its role;
        StoreError naming the URL without its password."""
        ...

    def github_login(self, settings: Settings, repository: tuple[str, str] | None) -> str:
        """The login thirdshift acts as (a GitHub App's: for ``repository``'s installation);
        ConfigError for missing credentials, GitHubError for a token GitHub refuses."""
        ...

    def access(self, settings: Settings, owner: str, name: str) -> Access:
        """The token's user's role on ``owner/name``; NotFound when GitHub shows no such
        repository to it."""
        ...

    def label_exists(self, settings: Settings, owner: str, name: str, label: str) -> bool:
        """Whether the repository has ``label``."""
        ...

    def workflow_grant(
        self, settings: Settings, repository: tuple[str, str] | None
    ) -> WorkflowGrant:
        """What GitHub says the credentials (a GitHub App's: for ``repository``'s
        installation) may do to workflow files."""
        ...

    def which(self, program: str) -> str | None:
        """Where ``program`` is on thirdshift's PATH, or None."""
        ...

    def version(self, argv: Sequence[str]) -> str:
        """The first line ``argv`` (a ``--version`` call) prints, within a short timeout."""
        ...

    def sandbox(self, settings: Settings) -> str:
        """Where bubblewrap is, once it sealed a trivial command here; AgentSandboxUnavailable
        naming the cause and the fix."""
        ...

    def agent_network(self, settings: Settings) -> str:
        """What a sealed process proved about its network: loopback services and a host not
        allowed unreachable, an allowed host reached through the egress proxy."""
        ...

    def session_groups(self, settings: Settings) -> str:
        """What bounds each session here (``cgroup v1 (...)``, ``cgroup v2 (...)``), once a
        trial group was made and removed; SessionLimitsUnavailable naming the fixes."""
        ...

    def sealed_version(self, settings: Settings, harness: str) -> str:
        """The first line the Harness's ``--version`` prints when started as a Session's CLI
        is: in the agent sandbox, with the Session's environment."""
        ...

    def model_key(self, settings: Settings, harness: str) -> str:
        """Where the Harness's model key would be during a session: what the model gateway
        keeps outside the sandbox (the providers it reaches); ``ModelKeyInside`` when its
        credential is one the CLI must read itself, naming the fix."""
        ...

    def free_disk_mb(self, settings: Settings) -> int:
        """Make and try the home's directories, then the MiB free on its disk; LocalProblem
        for a home a Run cannot use or a disk below ``min_free_disk_mb``."""
        ...

    def notification_targets(self, settings: Settings) -> tuple[str, ...]:
        """The notification targets as a Run builds them, each named without its secrets;
        ConfigError for a webhook without its secret or a URL Apprise cannot send to."""
        ...

    def test_session(self, settings: Settings, harness: str) -> str:
        """Run one tiny real session of ``harness`` as a Run would (its Model and options, in
        the agent sandbox unless that is turned off) and say how it answered; a
        ThirdshiftError naming the failure (a provider key, quota, network) otherwise."""
        ...


def _failed(name: str, error: ThirdshiftError) -> Check:
    problem, fix = split_fix(str(error))
    return Check(name, "FAIL", problem, fix)


def check_settings(outside: _Outside) -> tuple[Check, Settings | None]:
    try:
        settings = outside.settings()
    except ThirdshiftError as error:
        return _failed("settings", error), None
    detail = f"read (home {settings.home}, harness {settings.harness})"
    return Check("settings", "PASS", detail), settings


def check_database(outside: _Outside, settings: Settings) -> tuple[Check, Database | None]:
    try:
        found = outside.database(settings)
    except ThirdshiftError as error:
        return _failed("database", error), None
    revision = found.revision or "none (no migration recorded)"
    return Check("database", "PASS", f"{found.shown_url}, migrated to revision {revision}"), found


def check_database_role(settings: Settings, found: Database | None) -> Check | None:
    """PostgreSQL only (None on SQLite): whether thirdshift connects as a superuser. An agent
    that gets hold of the database URL could then read every database of the server and run
    programs as its system user; a role that owns only thirdshift's database limits that to
    thirdshift's rows. A warning, not a failure: Runs work either way."""
    name = "database role"
    if found is None:
        if settings.effective_database_url.startswith(("postgresql", "postgres:")):
            return _skipped(name, "the database cannot be opened")
        return None
    if found.role is None:
        return None
    if not found.role.superuser:
        return Check(name, "PASS", f"{found.role.name} is no superuser")
    return Check(
        name,
        "WARN",
        f"thirdshift connects as {found.role.name}, a superuser: whoever reads the database URL "
        "can read every database of the server and run programs as its system user",
        "connect as a role with a password that owns only thirdshift's database: CREATE ROLE "
        "thirdshift LOGIN PASSWORD '<a long random password>'; CREATE DATABASE thirdshift "
        "OWNER thirdshift; then set THIRDSHIFT_DATABASE_URL to "
        "postgresql://thirdshift:<password>@<host>/thirdshift",
    )


def repositories_of(settings: Settings, extra: Sequence[str]) -> list[str]:
    """The configured repositories and ``--repo`` ones, each once (GitHub ignores case)."""
    spelled: dict[str, str] = {}
    for full_name in [*settings.repositories, *extra]:
        spelled.setdefault(full_name.lower(), full_name)
    return list(spelled.values())


def check_github(outside: _Outside, settings: Settings, repositories: Sequence[str]) -> list[Check]:
    """The credentials, then each repository's permission and labels."""
    acting = "the GitHub App" if settings.github_app_id is not None else "the token"
    first = check_repository_name(repositories[0]) if repositories else None
    if first is None and settings.github_app_id is not None:
        return [
            Check(
                "github",
                "WARN",
                "a GitHub App acts through one installation per account, and no repository "
                "is configured to check it on",
                "pass --repo OWNER/NAME (or set repositories) to check the App there",
            )
        ]
    try:
        login = outside.github_login(settings, first)
    except ThirdshiftError as error:
        found = [_failed("github", error)]
        return found + [
            _skipped(f"repository {full_name}", "the GitHub credentials do not work")
            for full_name in repositories
        ]
    found = [Check("github", "PASS", f"{acting} acts as {login} on {settings.github_api_url}")]
    found.append(check_workflow_grant(outside, settings, first))
    for full_name in repositories:
        found += _repository_checks(outside, settings, full_name)
    return found


KEEP_CI_SECRETS = (
    "keep the repository's secrets from CI on thirdshift's branches (docs/running-an-issue.md, "
    "Workflow files and CI's secrets)"
)


def check_workflow_grant(
    outside: _Outside, settings: Settings, repository: tuple[str, str] | None
) -> Check:
    """A WARN when the credentials may write workflow files: a workflow an agent wrote would
    then run with the repository's secrets once pushed, stopped only by thirdshift's own
    pre-push check. Without that permission GitHub refuses pushes to .github/workflows itself
    (not to .github/actions or an action.yml: thirdshift refuses those)."""
    name = "workflow writes"
    try:
        grant = outside.workflow_grant(settings, repository)
    except ThirdshiftError as error:
        # Runs work either way: a question GitHub would not answer is no failure.
        problem, fix = split_fix(str(error))
        return Check(name, "WARN", f"cannot tell: {problem}", fix)
    if grant.may_write is False:
        return Check(name, "PASS", f"the credentials may not write workflow files ({grant.said})")
    if grant.may_write is None:
        return Check(
            name,
            "WARN",
            f"GitHub does not say whether the credentials may write workflow files ({grant.said})",
            "make sure the token's Workflows permission is No access (GitHub's Developer "
            f"settings, Fine-grained tokens); and {KEEP_CI_SECRETS}",
        )
    allowed = sorted(k for k, v in settings.allow_workflow_changes_by_repository.items() if v)
    by = (
        "allow_workflow_changes is on, so an agent's workflow would be pushed"
        if settings.allow_workflow_changes
        else "only thirdshift's pre-push check keeps an agent's workflow off GitHub"
        + (f" (allow_workflow_changes lets it through for {', '.join(allowed)})" if allowed else "")
    )
    return Check(
        name,
        "WARN",
        f"the credentials may write workflow files ({grant.said}): {by}, and CI would run it "
        "with the repository's secrets",
        "use credentials without it (a classic token without the workflow scope, a "
        "fine-grained token or GitHub App without the Workflows permission) unless thirdshift "
        f"must change workflows; and {KEEP_CI_SECRETS}",
    )


def _repository_checks(outside: _Outside, settings: Settings, full_name: str) -> list[Check]:
    owner, name = check_repository_name(full_name)
    check = f"repository {full_name}"
    labels = f"labels of {full_name}"
    try:
        access = outside.access(settings, owner, name)
    except NotFound:
        return [
            Check(
                check,
                "FAIL",
                f"GitHub has no repository {full_name}, or the token's user cannot see it",
                "check the name (--repo or the repositories setting) and the token",
            ),
            _skipped(labels, f"{full_name} cannot be seen"),
        ]
    except ThirdshiftError as error:
        return [_failed(check, error), _skipped(labels, f"{full_name} cannot be read")]
    if not access.pushes:
        return [
            Check(
                check,
                "FAIL",
                f"the token's user {access.login} has {access.role} permission on {full_name}",
                "thirdshift needs write there to push: use a token with write access, or drop "
                "the repository",
            ),
            _skipped(labels, "the token cannot push there"),
        ]
    pushes = Check(check, "PASS", f"{access.login} has {access.role} permission")
    try:
        missing = [
            label
            for label in (settings.ready_label, settings.in_progress_label)
            if not outside.label_exists(settings, owner, name, label)
        ]
    except ThirdshiftError as error:
        return [pushes, _failed(labels, error)]
    if not missing:
        return [pushes, Check(labels, "PASS", f"{' and '.join(_both(settings))} exist")]
    create = "; ".join(f"gh label create {label} --repo {full_name}" for label in missing)
    return [
        pushes,
        Check(
            labels,
            "WARN",
            f"missing: {', '.join(missing)}",
            f"create them in the repository's Labels page, or: {create} (a Claim adds "
            f"{settings.in_progress_label} itself when it is missing)",
        ),
    ]


def _both(settings: Settings) -> tuple[str, str]:
    return settings.ready_label, settings.in_progress_label


def check_git(outside: _Outside) -> Check:
    wanted = ".".join(str(part) for part in MIN_GIT)
    program = outside.which("git")
    if program is None:
        return Check("git", "FAIL", "git is not on PATH", f"install git {wanted} or newer")
    try:
        said = outside.version([program, "--version"])
    except ThirdshiftError as error:
        return _failed("git", error)
    number = re.search(r"(\d+)\.(\d+)", said)
    if number is not None and (int(number[1]), int(number[2])) < MIN_GIT:
        return Check("git", "FAIL", f"{said} is too old", f"install git {wanted} or newer")
    return Check("git", "PASS", f"{said} at {program}")


def check_harness(
    outside: _Outside, settings: Settings, harness: str, *, fallback: bool, sandbox: Check
) -> Check:
    """The Harness CLI on PATH, its version, and (sandbox willing) its start in the agent
    sandbox: ``--version`` as a Session's CLI is started. No model is asked: that costs money
    and needs a provider's key (adr/0017)."""
    check = f"harness {harness}"
    role = "a fallback in harness_fallbacks" if fallback else "the harness setting"
    program = outside.which(harness)
    if program is None:
        other = "take it out of harness_fallbacks" if fallback else "choose another with harness"
        entry = find_harness(harness)
        if entry is None:
            return Check(
                check,
                "FAIL",
                f"{harness} (the {harness} Harness, {role}) is not on PATH",
                f"install it or {other}",
            )
        problem, fix = split_fix(harness_not_found(entry, role, other))
        return Check(check, "FAIL", problem, fix)
    try:
        version = outside.version([program, "--version"])
    except ThirdshiftError as error:
        return _failed(check, error)
    found = f"{version} at {program}"
    if settings.unsafe_agent_without_sandbox:
        return Check(check, "PASS", f"{found}; starts unsealed (unsafe_agent_without_sandbox)")
    if sandbox.status != "PASS":
        return Check(check, "PASS", f"{found}; not started in the agent sandbox, which fails")
    try:
        outside.sealed_version(settings, harness)
    except ThirdshiftError as error:
        problem, _ = split_fix(str(error))
        return Check(
            check,
            "FAIL",
            f"{found}, but it does not start in the agent sandbox: {problem}",
            "install it and what it runs on (node) outside the directories the sandbox hides "
            "(your home, thirdshift's home, /tmp), for example with npm install -g under "
            "/usr/local",
        )
    return Check(check, "PASS", f"{found}; starts sealed in the agent sandbox, as a Session does")


def check_model_key(outside: _Outside, settings: Settings, harness: str) -> Check:
    """Whether the Harness's model key stays outside the sandbox, behind the model gateway
    (adr/0038): a FAIL when it cannot and nothing allows it inside, a WARN when an unsafe
    setting does."""
    check = f"model key {harness}"
    if settings.unsafe_agent_without_sandbox or settings.unsafe_agent_network:
        return Check(
            check,
            "WARN",
            "inside the sandbox: the agent's network is not sealed, so there is no model gateway",
            "seal the agent's network (take out unsafe_agent_network and "
            "unsafe_agent_without_sandbox)",
        )
    try:
        return Check(check, "PASS", outside.model_key(settings, harness))
    except ThirdshiftError as error:
        problem, fix = split_fix(str(error))
        if settings.unsafe_agent_holds_model_key:
            return Check(
                check, "WARN", f"inside the sandbox (unsafe_agent_holds_model_key): {problem}"
            )
        return Check(check, "FAIL", problem, fix)


def check_session(outside: _Outside, settings: Settings, harness: str) -> Check:
    """``doctor --session``: a tiny real session of the Harness, which asks its model (a few
    cents) and so proves the provider key, quota and network a Run needs."""
    check = f"session {harness}"
    try:
        answered = outside.test_session(settings, harness)
    except ThirdshiftError as error:
        return _failed(check, error)
    return Check(check, "PASS", answered)


def check_notifications(outside: _Outside, settings: Settings) -> Check:
    """The notification targets build as a Run builds them (a bad one stops every Run)."""
    try:
        targets = outside.notification_targets(settings)
    except ThirdshiftError as error:
        return _failed("notifications", error)
    if not targets:
        return Check("notifications", "PASS", "none configured")
    return Check("notifications", "PASS", ", ".join(targets))


def check_sandbox(outside: _Outside, settings: Settings) -> Check:
    if settings.unsafe_agent_without_sandbox:
        return Check(
            "agent sandbox",
            "WARN",
            "agents run without their sandbox (unsafe_agent_without_sandbox): an agent can read "
            "thirdshift's token",
            "install bubblewrap and remove unsafe_agent_without_sandbox, unless no stranger "
            "can write to the issues",
        )
    try:
        program = outside.sandbox(settings)
    except ThirdshiftError as error:
        return _failed("agent sandbox", error)
    return Check("agent sandbox", "PASS", f"bubblewrap at {program} seals a process here")


def check_agent_network(outside: _Outside, settings: Settings) -> Check:
    check = "agent network"
    if settings.unsafe_agent_without_sandbox or settings.unsafe_agent_network:
        setting = (
            "unsafe_agent_without_sandbox"
            if settings.unsafe_agent_without_sandbox
            else "unsafe_agent_network"
        )
        return Check(
            check,
            "WARN",
            f"agents share this host's network ({setting}): an agent can reach the database, "
            "the status page and every other service here",
            f"install bubblewrap and socat and remove {setting}, unless no stranger can write "
            "to the issues",
        )
    try:
        proved = outside.agent_network(settings)
    except ThirdshiftError as error:
        problem, fix = split_fix(str(error))
        if "unsafe_agent_network" not in fix:
            fix += "; or, knowing the agent then reaches this host's network, set "
            fix += "unsafe_agent_network = true"
        return Check(check, "FAIL", problem, fix.strip("; "))
    return Check(check, "PASS", proved)


def check_session_limits(outside: _Outside, settings: Settings) -> Check:
    check = "resource limits"
    if settings.unsafe_unbounded_sessions:
        return Check(
            check,
            "WARN",
            "sessions run without a cgroup of their own (unsafe_unbounded_sessions): one "
            "session can start processes and fill memory until this host stops",
            "run thirdshift as root (cgroup v1) or in a delegated cgroup v2 subtree "
            "(Delegate=yes in its systemd unit) and remove unsafe_unbounded_sessions",
        )
    try:
        found = outside.session_groups(settings)
    except ThirdshiftError as error:
        return _failed(check, error)
    return Check(
        check,
        "PASS",
        f"{found} bounds each session: {settings.session_max_processes} processes, "
        f"{settings.session_memory_mb} MB memory (tmpfs of {settings.session_tmpfs_mb} MB "
        f"included), {settings.session_disk_mb} MB disk",
    )


def check_disk(outside: _Outside, settings: Settings) -> Check:
    try:
        free = outside.free_disk_mb(settings)
    except ThirdshiftError as error:
        return _failed("home and disk", error)
    least = settings.min_free_disk_mb
    detail = f"{free} MiB free on the disk of {settings.home} (min_free_disk_mb {least})"
    return Check("home and disk", "PASS", detail)


def diagnose(
    outside: _Outside,
    repositories: Sequence[str] = (),
    *,
    report: Callable[[Check], None] = lambda _check: None,
    session: bool = False,
) -> list[Check]:
    """Every check, in the order of the report; ``report`` hears each as it is made. With
    ``session``, each Harness that starts also runs one tiny real session."""
    found: list[Check] = []

    def add(*checks: Check) -> None:
        for check in checks:
            found.append(check)
            report(check)

    why = "the settings cannot be read"
    settings_check, settings = check_settings(outside)
    add(settings_check)
    if settings is None:
        add(_skipped("database", why), _skipped("github", why))
    else:
        database, opened = check_database(outside, settings)
        add(database)
        role = check_database_role(settings, opened)
        if role is not None:
            add(role)
        checked = repositories_of(settings, repositories)
        github = check_github(outside, settings, checked)
        add(*github)
        add(*check_webhooks(outside, settings, checked, github))
        add(check_notifications(outside, settings))
    add(check_git(outside))
    if settings is None:
        skipped = ("harness", "agent sandbox", "agent network", "resource limits", "home and disk")
        add(*(_skipped(name, why) for name in skipped))
        return found
    # The sandbox is probed first: whether a Harness starts sealed depends on it.
    sandbox = check_sandbox(outside, settings)
    for name, fallback in [
        (settings.harness, False),
        *((other, True) for other in settings.fallback_harnesses),
    ]:
        started = check_harness(outside, settings, name, fallback=fallback, sandbox=sandbox)
        add(started)
        if started.status == "PASS":
            add(check_model_key(outside, settings, name))
        if session:
            add(
                check_session(outside, settings, name)
                if started.status == "PASS"
                else _skipped(f"session {name}", f"the {name} Harness does not start")
            )
    add(sandbox, check_agent_network(outside, settings), check_session_limits(outside, settings))
    add(check_disk(outside, settings))
    return found


def failed(checks: Sequence[Check]) -> bool:
    """Whether any check failed: ``doctor`` then exits 1."""
    return any(check.status == "FAIL" for check in checks)
