"""The checks of `thirdshift doctor`, through a scripted Outside: each finding becomes one
Check with its fix, and a failure never hides the checks that can still run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from thirdshift.doctor.checks import (
    Access,
    Check,
    Database,
    WorkflowGrant,
    diagnose,
    failed,
    split_fix,
)
from thirdshift.errors import ConfigError, NotFound, StoreError, ThirdshiftError
from thirdshift.harnesses import AgentSandboxUnavailable
from thirdshift.records import DatabaseRole, HookDelivery, Webhook
from thirdshift.settings import Settings

HOME = Path("/srv/thirdshift")


@dataclass
class ScriptedOutside:
    """A machine described by values: what is on PATH, each repository's role and labels,
    and the error each step raises instead, if any (``raises[method]``)."""

    settings_values: dict[str, Any] = field(default_factory=dict)
    on_path: dict[str, str] = field(
        default_factory=lambda: {
            "git": "/usr/bin/git",
            "claude": "/opt/bin/claude",
            "codex": "/opt/bin/codex",
        }
    )
    versions: dict[str, str] = field(
        default_factory=lambda: {
            "git": "git version 2.43.0",
            "claude": "2.1.328 (Claude Code)",
            "codex": "codex-cli 0.169.0",
        }
    )
    roles: dict[str, str] = field(default_factory=lambda: {"acme/widgets": "write"})
    labels: dict[str, set[str]] = field(
        default_factory=lambda: {"acme/widgets": {"ready-for-agent", "in-progress"}}
    )
    raises: dict[str, ThirdshiftError] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    database_role: DatabaseRole | None = None  # None: SQLite, which has no roles
    workflows: WorkflowGrant = field(
        default_factory=lambda: WorkflowGrant(False, "its scopes: repo")
    )
    # Webhooks by "owner/name" (a repository's) or "owner" (an organisation's); the error a
    # read of them raises instead; and each hook's deliveries, newest first.
    hooks: dict[str, tuple[Webhook, ...]] = field(default_factory=dict)
    hook_errors: dict[str, ThirdshiftError] = field(default_factory=dict)
    deliveries: dict[int, tuple[HookDelivery, ...]] = field(default_factory=dict)

    def _step(self, method: str, argument: Any = None) -> None:
        self.calls.append((method, argument))
        if method in self.raises:
            raise self.raises[method]

    def settings(self) -> Settings:
        self._step("settings")
        return Settings(home=HOME, **self.settings_values)

    def database(self, settings: Settings) -> Database:
        self._step("database")
        return Database("sqlite:////srv/thirdshift/thirdshift.db", "0004", self.database_role)

    def github_login(self, settings: Settings, repository: tuple[str, str] | None) -> str:
        self._step("github_login", repository)
        return "factory"

    def access(self, settings: Settings, owner: str, name: str) -> Access:
        self._step("access", f"{owner}/{name}")
        role = self.roles.get(f"{owner}/{name}")
        if role is None:
            raise NotFound("no such repository", 404)
        return Access("factory", role, role in ("admin", "maintain", "write"))

    def label_exists(self, settings: Settings, owner: str, name: str, label: str) -> bool:
        self._step("label_exists", label)
        return label in self.labels.get(f"{owner}/{name}", set())

    def workflow_grant(
        self, settings: Settings, repository: tuple[str, str] | None
    ) -> WorkflowGrant:
        self._step("workflow_grant", repository)
        return self.workflows

    def webhooks(self, settings: Settings, owner: str, name: str | None) -> tuple[Webhook, ...]:
        where = f"{owner}/{name}" if name is not None else owner
        self._step("webhooks", where)
        if where in self.hook_errors:
            raise self.hook_errors[where]
        return self.hooks.get(where, ())

    def webhook_deliveries(
        self, settings: Settings, owner: str, name: str | None, hook_id: int, limit: int
    ) -> tuple[HookDelivery, ...]:
        self._step("webhook_deliveries", hook_id)
        return self.deliveries.get(hook_id, ())[:limit]

    def which(self, program: str) -> str | None:
        self.calls.append(("which", program))
        return self.on_path.get(program)

    def version(self, argv: Sequence[str]) -> str:
        program = Path(argv[0]).name
        self._step("version", program)
        return self.versions[program]

    def sandbox(self, settings: Settings) -> str:
        self._step("sandbox")
        return "/usr/bin/bwrap"

    def agent_network(self, settings: Settings) -> str:
        self._step("agent_network")
        return "a sealed process reached an allowed host through the egress proxy"

    def session_groups(self, settings: Settings) -> str:
        self._step("session_groups")
        return "cgroup v1 (pids, memory, cpu)"

    def sealed_version(self, settings: Settings, harness: str) -> str:
        self._step("sealed_version", harness)
        return self.versions[harness]

    def model_key(self, settings: Settings, harness: str) -> str:
        self._step("model_key", harness)
        return "kept outside the sandbox by the model gateway (to https://api.anthropic.com)"

    def free_disk_mb(self, settings: Settings) -> int:
        self._step("free_disk_mb")
        return 20480

    def notification_targets(self, settings: Settings) -> tuple[str, ...]:
        self._step("notification_targets")
        return ()

    def test_session(self, settings: Settings, harness: str) -> str:
        self._step("test_session", harness)
        return f"answered in 2s: 'OK' ({harness})"


def by_name(checks: Sequence[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


def configured(**values: Any) -> ScriptedOutside:
    return ScriptedOutside(settings_values={"repositories": ["acme/widgets"], **values})


def test_a_healthy_machine_passes_every_check_in_the_reports_order() -> None:
    """Settings, database, GitHub, each repository and its labels, git, the Harness, the
    sandbox and the disk all pass, in that order, and nothing counts as failed."""
    checks = diagnose(configured())
    assert [(check.name, check.status) for check in checks] == [
        ("settings", "PASS"),
        ("database", "PASS"),
        ("github", "PASS"),
        ("workflow writes", "PASS"),
        ("repository acme/widgets", "PASS"),
        ("labels of acme/widgets", "PASS"),
        ("notifications", "PASS"),
        ("git", "PASS"),
        ("harness claude", "PASS"),
        ("model key claude", "PASS"),
        ("agent sandbox", "PASS"),
        ("agent network", "PASS"),
        ("resource limits", "PASS"),
        ("home and disk", "PASS"),
    ]
    assert not failed(checks)
    found = by_name(checks)
    assert found["database"].detail.endswith("migrated to revision 0004")
    assert found["harness claude"].detail == (
        "2.1.328 (Claude Code) at /opt/bin/claude; starts sealed in the agent sandbox, as a "
        "Session does"
    )


def test_checks_are_reported_as_they_are_made() -> None:
    """The report hears each check once, in order, as diagnose returns them."""
    heard: list[Check] = []
    checks = diagnose(configured(), report=heard.append)
    assert heard == checks


def test_unreadable_settings_fail_and_skip_what_needs_them_but_git_is_still_checked() -> None:
    """A ConfigError is a FAIL split into problem and fix; checks needing the settings say they
    were skipped and why; git, which needs none, still runs."""
    outside = configured()
    outside.raises["settings"] = ConfigError(
        "/srv/thirdshift/config.toml: unknown key 'harnes'; known keys are harness, home"
    )
    checks = by_name(diagnose(outside))
    assert checks["settings"] == Check(
        "settings",
        "FAIL",
        "/srv/thirdshift/config.toml: unknown key 'harnes'",
        "known keys are harness, home",
    )
    for name in ("database", "github", "harness", "agent sandbox", "home and disk"):
        assert checks[name].status == "SKIP"
        assert checks[name].detail == "skipped: the settings cannot be read"
    assert checks["git"].status == "PASS"


def test_an_unreachable_database_fails_with_its_fix_and_the_rest_still_run() -> None:
    """The store's message names the URL (password hidden) and what to check."""
    outside = configured()
    outside.raises["database"] = StoreError(
        "cannot open the database postgresql://u:***@127.0.0.1:1/x: OperationalError: refused; "
        "check THIRDSHIFT_DATABASE_URL and that the server runs"
    )
    checks = diagnose(outside)
    found = by_name(checks)
    assert found["database"].status == "FAIL"
    assert found["database"].fix == "check THIRDSHIFT_DATABASE_URL and that the server runs"
    assert [c.status for c in checks if c.name != "database"] == ["PASS"] * 13
    assert failed(checks)


POSTGRES = "postgresql://thirdshift@db.internal/thirdshift"


def test_a_postgresql_superuser_is_a_warning_with_the_fix_and_fails_nothing() -> None:
    """Right after the database: a superuser is warned of (an agent with the URL would own
    the server), the fix is a role that owns only thirdshift's database; doctor still passes."""
    outside = configured(database_url=POSTGRES)
    outside.database_role = DatabaseRole("postgres", superuser=True)
    checks = diagnose(outside)
    names = [check.name for check in checks]
    assert names[1:3] == ["database", "database role"]
    role = checks[2]
    assert role.status == "WARN"
    assert role.detail.startswith("thirdshift connects as postgres, a superuser: ")
    assert role.fix.startswith("connect as a role with a password that owns only thirdshift's")
    assert "CREATE ROLE thirdshift LOGIN PASSWORD" in role.fix
    assert "CREATE DATABASE thirdshift OWNER thirdshift;" in role.fix
    assert not failed(checks)


def test_a_postgresql_role_that_is_no_superuser_passes() -> None:
    outside = configured(database_url=POSTGRES)
    outside.database_role = DatabaseRole("thirdshift", superuser=False)
    assert by_name(diagnose(outside))["database role"] == Check(
        "database role", "PASS", "thirdshift is no superuser"
    )


def test_sqlite_has_no_database_role_line() -> None:
    assert "database role" not in by_name(diagnose(configured()))


def test_a_postgresql_database_that_cannot_be_opened_skips_its_role() -> None:
    outside = configured(database_url=POSTGRES)
    outside.raises["database"] = StoreError("cannot open the database; check the server")
    found = by_name(diagnose(outside))
    assert found["database"].status == "FAIL"
    assert found["database role"] == Check(
        "database role", "SKIP", "skipped: the database cannot be opened"
    )


def test_a_missing_harness_cli_fails_naming_its_package_and_the_other_checks_pass() -> None:
    """The Harness found nowhere is a FAIL whose fix names the install script and the pinned
    npm package; its version and sandbox start are not tried."""
    outside = configured()
    del outside.on_path["claude"]
    checks = by_name(diagnose(outside))
    assert checks["harness claude"] == Check(
        "harness claude",
        "FAIL",
        "claude (the claude Harness, the harness setting) is not installed: it is in no "
        "directory of harness_paths, not in the node_modules/.bin beside thirdshift's virtual "
        "environment and not on PATH",
        "run scripts/install in thirdshift's checkout, or npm install -g "
        "@anthropic-ai/claude-code@2.1.328, or set harness_paths to the directory holding it, "
        "or choose another with harness",
    )
    assert ("sealed_version", "claude") not in outside.calls
    assert checks["agent sandbox"].status == "PASS"


def test_each_fallback_harness_is_checked_and_a_missing_one_says_to_drop_it() -> None:
    """harness_fallbacks are checked after the Run's Harness; a missing one's fix is to
    install it or take it out of harness_fallbacks."""
    outside = configured(harness_fallbacks=["codex"])
    del outside.on_path["codex"]
    checks = diagnose(outside)
    names = [check.name for check in checks]
    # Each Harness is followed by where its model key would be.
    assert names.index("harness claude") + 2 == names.index("harness codex")
    codex = by_name(checks)["harness codex"]
    assert codex.status == "FAIL"
    assert "a fallback in harness_fallbacks" in codex.detail
    assert codex.fix.endswith("or take it out of harness_fallbacks")


def test_a_harness_that_does_not_start_in_the_sandbox_fails() -> None:
    """A CLI found on PATH that cannot run sealed (its install hidden, say) would fail every
    Session: a FAIL carrying the sandbox's reason."""
    outside = configured()
    outside.raises["sealed_version"] = ThirdshiftError(
        "`claude --version` failed (node: not found); run it by hand to see why, and reinstall it"
    )
    check = by_name(diagnose(outside))["harness claude"]
    assert check.status == "FAIL"
    assert check.detail.startswith("2.1.328 (Claude Code) at /opt/bin/claude, but it does not")
    assert "node: not found" in check.detail
    assert check.fix.startswith("install it and what it runs on (node) outside the directories")


def test_a_token_without_push_permission_fails_its_repository_and_skips_the_labels() -> None:
    """A role that cannot push is a FAIL naming the login, the role and the fix."""
    outside = configured()
    outside.roles["acme/widgets"] = "read"
    checks = by_name(diagnose(outside))
    assert checks["repository acme/widgets"] == Check(
        "repository acme/widgets",
        "FAIL",
        "the token's user factory has read permission on acme/widgets",
        "thirdshift needs write there to push: use a token with write access, or drop the "
        "repository",
    )
    assert checks["labels of acme/widgets"].status == "SKIP"


def test_a_repository_github_does_not_show_fails_with_what_to_check() -> None:
    outside = configured()
    outside.roles.clear()
    check = by_name(diagnose(outside))["repository acme/widgets"]
    assert check.status == "FAIL"
    assert check.fix == "check the name (--repo or the repositories setting) and the token"


def test_missing_labels_are_a_warning_with_how_to_create_them() -> None:
    """A missing Ready or in-progress label warns (no FAIL: the exit status stays 0)."""
    outside = configured()
    outside.labels["acme/widgets"] = {"in-progress"}
    checks = diagnose(outside)
    labels = by_name(checks)["labels of acme/widgets"]
    assert labels.status == "WARN"
    assert labels.detail == "missing: ready-for-agent"
    assert "gh label create ready-for-agent --repo acme/widgets" in labels.fix
    assert not failed(checks)


def test_credentials_github_refuses_fail_once_and_skip_every_repository() -> None:
    outside = configured()
    outside.raises["github_login"] = ThirdshiftError(
        "GitHub refused the token (401 Bad credentials); set GITHUB_TOKEN to a valid token"
    )
    checks = by_name(diagnose(outside, ["acme/gadgets"]))
    assert checks["github"].fix == "set GITHUB_TOKEN to a valid token"
    for name in ("repository acme/widgets", "repository acme/gadgets"):
        assert checks[name].detail == "skipped: the GitHub credentials do not work"


def test_repositories_from_settings_and_command_line_are_checked_once_each() -> None:
    """--repo adds to the repositories setting; a name differing only in case is one repo."""
    outside = configured()
    outside.roles["acme/gadgets"] = "admin"
    outside.labels["acme/gadgets"] = {"ready-for-agent", "in-progress"}
    checks = diagnose(outside, ["ACME/widgets", "acme/gadgets"])
    repositories = [c.name for c in checks if c.name.startswith("repository ")]
    assert repositories == ["repository acme/widgets", "repository acme/gadgets"]
    assert ("github_login", ("acme", "widgets")) in outside.calls


def test_a_github_app_with_no_repository_to_check_on_warns() -> None:
    """An App's installation is per account: with no repository, the check cannot be made."""
    outside = ScriptedOutside(settings_values={"github_app_id": 42})
    check = by_name(diagnose(outside))["github"]
    assert check.status == "WARN"
    assert check.fix.startswith("pass --repo OWNER/NAME")
    assert not any(call[0] == "github_login" for call in outside.calls)


def test_no_sandbox_fails_with_its_fix_and_harnesses_are_not_started_sealed() -> None:
    outside = configured()
    outside.raises["sandbox"] = AgentSandboxUnavailable(
        "the agent sandbox cannot be made: bubblewrap (bwrap) is not installed; install it "
        "(Debian: apt-get install bubblewrap); or, knowing the agent can then read "
        "thirdshift's token, set unsafe_agent_without_sandbox = true"
    )
    checks = by_name(diagnose(outside))
    assert checks["agent sandbox"].status == "FAIL"
    assert checks["agent sandbox"].fix.startswith("install it (Debian: apt-get install bubblewrap)")
    assert checks["harness claude"].status == "PASS"
    assert "not started in the agent sandbox" in checks["harness claude"].detail
    assert not any(call[0] == "sealed_version" for call in outside.calls)


def test_the_unsafe_setting_warns_and_the_harness_starts_unsealed() -> None:
    """Without the sandbox by choice: a WARN (not fatal), bubblewrap is not even probed."""
    outside = configured(unsafe_agent_without_sandbox=True)
    checks = diagnose(outside)
    found = by_name(checks)
    assert found["agent sandbox"].status == "WARN"
    assert found["harness claude"].detail.endswith("starts unsealed (unsafe_agent_without_sandbox)")
    assert not any(call[0] in ("sandbox", "sealed_version") for call in outside.calls)
    assert not failed(checks)


@pytest.mark.parametrize(
    ("said", "status"),
    [("git version 2.35.1", "FAIL"), ("git version 2.36.0", "PASS"), ("git version 3.0", "PASS")],
)
def test_git_older_than_2_36_fails(said: str, status: str) -> None:
    outside = configured()
    outside.versions["git"] = said
    assert by_name(diagnose(outside))["git"].status == status


def test_no_git_fails_with_the_version_to_install() -> None:
    outside = configured()
    del outside.on_path["git"]
    assert by_name(diagnose(outside))["git"] == Check(
        "git", "FAIL", "git is not on PATH", "install git 2.36 or newer"
    )


def test_a_full_disk_fails_with_the_home_checks_own_message() -> None:
    from thirdshift.home import LocalProblem

    outside = configured()
    outside.raises["free_disk_mb"] = LocalProblem(
        "only 12 MiB free on the disk of /srv/thirdshift; free some space (thirdshift needs "
        "512 MiB, the setting min_free_disk_mb)"
    )
    check = by_name(diagnose(outside))["home and disk"]
    assert check.status == "FAIL"
    assert check.fix.startswith("free some space")


def test_a_message_splits_into_problem_and_fix_at_its_first_semicolon() -> None:
    assert split_fix("a; b; c") == ("a", "b; c")
    assert split_fix("no fix given") == ("no fix given", "")


def test_a_session_is_run_only_when_asked_and_only_for_a_harness_that_starts() -> None:
    """--session: each Harness that starts runs one tiny session (a PASS with its answer, a
    FAIL with the provider's problem and fix); one that does not start is skipped."""
    outside = ScriptedOutside(
        settings_values={"harness_fallbacks": ["codex"]},
        on_path={"git": "/usr/bin/git", "claude": "/opt/bin/claude"},
    )
    assert [c.name for c in diagnose(outside) if c.name.startswith("session")] == []

    checks = {c.name: c for c in diagnose(outside, session=True)}

    assert (checks["session claude"].status, checks["session claude"].detail) == (
        "PASS",
        "answered in 2s: 'OK' (claude)",
    )
    assert checks["session codex"].status == "SKIP"
    outside.raises["test_session"] = ThirdshiftError(
        "a test session of claude failed: 401 invalid x-api-key; check its model provider's key"
    )
    failed = {c.name: c for c in diagnose(outside, session=True)}["session claude"]
    assert (failed.status, failed.fix) == ("FAIL", "check its model provider's key")


def test_a_notification_target_a_run_would_refuse_fails_the_doctor_too() -> None:
    """A webhook without its secret stops every Run: the doctor says so with the fix."""
    outside = configured()
    outside.raises["notification_targets"] = ConfigError(
        "notify_webhook_url is set without notify_webhook_secret; set a shared secret so the "
        "receiver can check that a message comes from thirdshift"
    )
    found = by_name(diagnose(outside))["notifications"]
    assert (found.status, found.detail) == (
        "FAIL",
        "notify_webhook_url is set without notify_webhook_secret",
    )
    assert found.fix.startswith("set a shared secret")


def test_a_check_s_json_is_the_documented_shape_with_its_type_and_version() -> None:
    check = Check("git", "FAIL", "git 2.30 is too old", "install git 2.36 or newer")
    assert check.json() == {
        "type": "doctor_check",
        "version": 1,
        "name": "git",
        "status": "FAIL",
        "detail": "git 2.30 is too old",
        "fix": "install git 2.36 or newer",
    }


def test_an_agent_network_that_cannot_be_sealed_fails_naming_unsafe_agent_network() -> None:
    """No network namespace (or no socat) here: every Run would refuse to start, so a FAIL
    whose fix names the setting that lets agents share the host's network."""
    outside = configured()
    outside.raises["agent_network"] = AgentSandboxUnavailable(
        "the agent's network cannot be sealed: socat (the bridge to the egress proxy) is not "
        "installed; install it (Debian: apt-get install socat); or, knowing the agent can then "
        "reach every service on this host's network (the database, the status page), set "
        "unsafe_agent_network = true"
    )
    check = by_name(diagnose(outside))["agent network"]
    assert check.status == "FAIL"
    assert "socat" in check.detail
    assert check.fix.endswith("set unsafe_agent_network = true")


def test_a_sealed_agent_network_passes_with_what_the_probe_proved() -> None:
    check = by_name(diagnose(configured()))["agent network"]
    assert check == Check(
        "agent network",
        "PASS",
        "a sealed process reached an allowed host through the egress proxy",
    )


def test_the_unsafe_network_setting_warns_without_probing() -> None:
    """Sharing the host's network by choice is a WARN that names the setting, as the unsafe
    sandbox setting is; the probe is not run."""
    outside = configured(unsafe_agent_network=True)
    check = by_name(diagnose(outside))["agent network"]
    assert check.status == "WARN"
    assert "unsafe_agent_network" in check.detail
    assert check.fix.startswith("install bubblewrap and socat and remove unsafe_agent_network")
    assert not any(call[0] == "agent_network" for call in outside.calls)


def test_a_token_that_may_write_workflows_warns_with_the_fix_and_how_to_keep_ci_secrets() -> None:
    outside = configured()
    outside.workflows = WorkflowGrant(True, "its scopes: repo, workflow")
    checks = diagnose(outside)
    check = by_name(checks)["workflow writes"]
    assert check.status == "WARN"
    assert check.detail.startswith(
        "the credentials may write workflow files (its scopes: repo, workflow): only "
        "thirdshift's pre-push check keeps an agent's workflow off GitHub"
    )
    assert "without the workflow scope" in check.fix
    assert "keep the repository's secrets from CI on thirdshift's branches" in check.fix
    assert not failed(checks)
    assert ("workflow_grant", ("acme", "widgets")) in outside.calls


def test_workflow_writes_with_allow_workflow_changes_on_say_an_agents_workflow_is_pushed() -> None:
    outside = configured(allow_workflow_changes=True)
    outside.workflows = WorkflowGrant(True, "GitHub App 7's installation grants workflows: write")
    check = by_name(diagnose(outside))["workflow writes"]
    assert check.status == "WARN"
    assert "allow_workflow_changes is on, so an agent's workflow would be pushed" in check.detail


def test_a_token_github_names_no_permissions_of_warns_that_it_cannot_tell() -> None:
    outside = configured()
    outside.workflows = WorkflowGrant(None, "a fine-grained token")
    check = by_name(diagnose(outside))["workflow writes"]
    assert check.status == "WARN"
    assert check.detail.startswith("GitHub does not say whether the credentials may write")
    assert "Workflows permission is No access" in check.fix


def test_a_token_without_the_workflow_scope_passes_naming_its_scopes() -> None:
    check = by_name(diagnose(configured()))["workflow writes"]
    assert check == Check(
        "workflow writes", "PASS", "the credentials may not write workflow files (its scopes: repo)"
    )


def test_a_grant_github_will_not_answer_warns_and_fails_nothing() -> None:
    outside = configured()
    outside.raises["workflow_grant"] = ThirdshiftError("GitHub answered 502; try again later")
    checks = diagnose(outside)
    assert by_name(checks)["workflow writes"] == Check(
        "workflow writes", "WARN", "cannot tell: GitHub answered 502", "try again later"
    )
    assert not failed(checks)


LOGIN_ONLY = ThirdshiftError(
    "no model key is set in ANTHROPIC_API_KEY, so the CLI would use its login, which it reads "
    "inside the sandbox; set a key in one of those variables (the model gateway then keeps it "
    "outside), or set unsafe_agent_holds_model_key = true"
)


def test_a_harness_whose_key_cannot_stay_outside_the_sandbox_fails_naming_both_fixes() -> None:
    """A CLI with a login and no key would hold its credential inside the sandbox: the doctor
    fails it, with the key variable and the unsafe setting as the fix."""
    outside = configured()
    outside.raises["model_key"] = LOGIN_ONLY
    checks = diagnose(outside)
    found = by_name(checks)["model key claude"]
    assert found.status == "FAIL"
    assert "reads inside the sandbox" in found.detail
    assert "unsafe_agent_holds_model_key = true" in found.fix
    assert failed(checks)


def test_the_unsafe_key_setting_turns_that_failure_into_a_warning() -> None:
    """With unsafe_agent_holds_model_key the same CLI starts, and the doctor warns."""
    outside = configured()
    outside.settings_values["unsafe_agent_holds_model_key"] = True
    outside.raises["model_key"] = LOGIN_ONLY
    found = by_name(diagnose(outside))["model key claude"]
    assert found.status == "WARN"
    assert "unsafe_agent_holds_model_key" in found.detail


def test_an_unsealed_network_warns_that_the_key_is_inside_without_asking_the_harness() -> None:
    """No sealed network, no gateway: the key is inside, said as a warning."""
    outside = configured()
    outside.settings_values["unsafe_agent_network"] = True
    found = by_name(diagnose(outside))["model key claude"]
    assert found.status == "WARN"
    assert ("model_key", "claude") not in outside.calls
