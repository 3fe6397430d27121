"""`thirdshift doctor` against the GitHub stand-in, real git, real bubblewrap and the pinned
Harness CLIs: a healthy world passes, and each broken piece is one FAIL line with its fix.
One world serves every test (doctor changes nothing on GitHub); each test varies only the
environment it runs doctor with, or restores what it changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.real_cli import BIN_DIR
from tests.support.run_world import (
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    python_without_clis,
    start_world,
    stop_world,
)
from thirdshift.sandbox.model.opencode import opencode_env
from thirdshift.sandbox.model.server import ModelScript

pytestmark = pytest.mark.real_cli

REPO = f"{OWNER}/{NAME}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunWorld]:
    made = start_world(tmp_path_factory.mktemp("doctor"), [])
    yield made
    stop_world(made)


def doctor(world: RunWorld, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """`thirdshift doctor --repo acme/calculator` with ``settings`` over the world's env."""
    saved = dict(world.settings)
    world.settings.update(settings)
    try:
        result = world.thirdshift("doctor", "--repo", REPO, *args, timeout=120)
    finally:
        world.settings.clear()
        world.settings.update(saved)
    assert TOKEN not in result.stdout + result.stderr
    return result


def line(result: subprocess.CompletedProcess[str], name: str) -> tuple[str, str]:
    """The report line of check ``name`` and the fix line under it ('' when none)."""
    lines = result.stdout.splitlines()
    for index, text in enumerate(lines):
        if text.split("  ", 1)[-1].startswith(f"{name}: "):
            after = lines[index + 1] if index + 1 < len(lines) else ""
            return text, after.strip() if after.startswith("      fix: ") else ""
    raise AssertionError(f"no check {name!r} in:\n{result.stdout}")


def path_of(tmp: Path, *kept: str, harnesses: bool = True) -> str:
    """A PATH holding only ``kept`` programs (linked into a directory of their own), this
    Python and, unless told not to, the pinned Harness CLIs: nothing else of /usr/bin."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for program in kept:
        found = shutil.which(program)
        assert found, f"{program} is needed on this machine"
        link = bin_dir / program
        if not link.exists():
            link.symlink_to(found)
    dirs = [bin_dir, *([BIN_DIR] if harnesses else []), Path(sys.executable).parent]
    return os.pathsep.join(str(directory) for directory in dirs)


def test_a_healthy_world_passes_and_a_missing_label_only_warns(world: RunWorld) -> None:
    """Every check passes but the in-progress label (a WARN with how to create it): exit 0.
    Once the label exists, every check passes."""
    result = doctor(world)
    assert result.returncode == 0, result.stdout + result.stderr
    assert line(result, "github")[0] == (
        f"PASS  github: the token acts as maintainer on {world.api_url}"
    )
    assert line(result, f"repository {REPO}")[0].startswith("PASS")
    assert line(result, "git")[0].startswith("PASS  git: git version ")
    claude, _ = line(result, "harness claude")
    assert claude.startswith("PASS  harness claude: 2.1.328 (Claude Code) at ")
    assert claude.endswith("; starts sealed in the agent sandbox, as a Session does")
    assert line(result, "agent sandbox")[0].startswith("PASS")
    assert line(result, "agent network")[0].startswith(
        "PASS  agent network: a sealed process reached an allowed host through the egress proxy"
    )
    assert re.search(r", migrated to revision \d{4}$", line(result, "database")[0])
    labels, fix = line(result, f"labels of {REPO}")
    assert labels == f"WARN  labels of {REPO}: missing: in-progress"
    assert f"gh label create in-progress --repo {REPO}" in fix
    assert result.stdout.splitlines()[-1] == "0 check(s) failed, 1 warning(s)"

    world.rest("POST", f"/repos/{REPO}/labels", {"name": "in-progress", "color": "fbca04"})
    result = doctor(world, "--json")
    assert result.returncode == 0, result.stdout
    checks = [json.loads(text) for text in result.stdout.splitlines()]
    assert {check["status"] for check in checks} == {"PASS"}
    assert [check["name"] for check in checks] == [
        "settings",
        "database",
        "github",
        "workflow writes",
        f"repository {REPO}",
        f"labels of {REPO}",
        "notifications",
        "git",
        "harness claude",
        "model key claude",
        "agent sandbox",
        "agent network",
        "resource limits",
        "home and disk",
    ]


def test_a_missing_harness_cli_fails_with_how_to_install_it(
    world: RunWorld, tmp_path: Path
) -> None:
    """claude neither beside thirdshift's install nor on PATH: its FAIL names the install
    script and the pinned npm package; the other checks still pass."""
    world.python = python_without_clis(tmp_path)
    try:
        result = doctor(
            world, PATH=path_of(tmp_path, "git", "bwrap", "node", "cat", harnesses=False)
        )
    finally:
        world.python = sys.executable
    assert result.returncode == 1
    claude, fix = line(result, "harness claude")
    assert claude == (
        "FAIL  harness claude: claude (the claude Harness, the harness setting) is not "
        "installed: it is in no directory of harness_paths, not in the node_modules/.bin beside "
        "thirdshift's virtual environment and not on PATH"
    )
    assert fix == (
        "fix: run scripts/install in thirdshift's checkout, or npm install -g "
        "@anthropic-ai/claude-code@2.1.328, or set harness_paths to the directory holding it, "
        "or choose another with harness"
    )
    assert line(result, "agent sandbox")[0].startswith("PASS")
    assert line(result, "git")[0].startswith("PASS")


def test_a_token_without_push_permission_fails_its_repository(world: RunWorld) -> None:
    world.client.add_user("maintainer", TOKEN, {REPO: "read"})
    try:
        result = doctor(world)
    finally:
        world.client.add_user("maintainer", TOKEN, {REPO: "admin"})
    assert result.returncode == 1
    repository, fix = line(result, f"repository {REPO}")
    assert repository == (
        f"FAIL  repository {REPO}: the token's user maintainer has no push permission on {REPO}"
    )
    assert fix.startswith("fix: thirdshift needs write there to push")
    assert line(result, f"labels of {REPO}")[0].startswith("SKIP")


def test_an_unreachable_database_fails_naming_it_without_its_password(world: RunWorld) -> None:
    result = doctor(world, THIRDSHIFT_DATABASE_URL="postgresql://u:pw-secret@127.0.0.1:1/none")
    assert result.returncode == 1
    database, fix = line(result, "database")
    assert database.startswith("FAIL  database: cannot open the database postgresql://u:")
    assert "127.0.0.1:1/none" in database
    assert "pw-secret" not in result.stdout + result.stderr
    assert fix == "fix: check THIRDSHIFT_DATABASE_URL and that the server runs"
    assert line(result, "github")[0].startswith("PASS")


@pytest.mark.postgres
def test_a_postgresql_superuser_only_warns_and_a_role_of_its_own_passes(
    world: RunWorld, postgres_url: str, postgres_role_url: str
) -> None:
    """The test server's postgres is a superuser: a WARN right after the database, with the
    fix, and doctor still exits 0. Connected as a role with a password and no superuser, the
    check passes."""
    result = doctor(world, THIRDSHIFT_DATABASE_URL=postgres_url)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("PASS  database: "))
    role, fix = line(result, "database role")
    assert lines[at + 1] == role
    user = sa.make_url(postgres_url).username
    assert role.startswith(f"WARN  database role: thirdshift connects as {user}, a superuser")
    assert fix.startswith("fix: connect as a role with a password that owns only thirdshift's")
    assert "CREATE ROLE thirdshift LOGIN PASSWORD" in fix
    result = doctor(world, THIRDSHIFT_DATABASE_URL=postgres_role_url)
    assert result.returncode == 0, result.stdout + result.stderr
    role, fix = line(result, "database role")
    assert re.fullmatch(r"PASS  database role: r_\w+ is no superuser", role)
    assert fix == ""
    password = sa.make_url(postgres_role_url).password
    assert password
    assert password not in result.stdout + result.stderr


def test_no_bubblewrap_fails_the_sandbox_with_its_fix(world: RunWorld, tmp_path: Path) -> None:
    """bwrap missing from PATH: the sandbox FAILs with how to install it (or the unsafe
    setting); the Harness is found but not started sealed."""
    result = doctor(world, PATH=path_of(tmp_path, "git", "node"))
    assert result.returncode == 1
    sandbox, fix = line(result, "agent sandbox")
    assert sandbox == (
        "FAIL  agent sandbox: the agent sandbox cannot be made: bubblewrap (bwrap) is not installed"
    )
    assert fix.startswith("fix: install it (Debian: apt-get install bubblewrap); or, knowing")
    assert fix.endswith("set unsafe_agent_without_sandbox = true")
    claude, _ = line(result, "harness claude")
    assert claude.startswith("PASS")
    assert "not started in the agent sandbox" in claude


def test_without_socat_the_agent_network_fails_naming_unsafe_agent_network(
    world: RunWorld, tmp_path: Path
) -> None:
    """bubblewrap is there but the bridge to the egress proxy is not: no Run could start, so
    the agent network FAILs with how to install socat or the unsafe setting."""
    result = doctor(world, PATH=path_of(tmp_path, "git", "node", "bwrap", "cat"))
    assert result.returncode == 1
    assert line(result, "agent sandbox")[0].startswith("PASS")
    network, fix = line(result, "agent network")
    assert network == (
        "FAIL  agent network: the agent's network cannot be sealed: socat (the bridge to the "
        "egress proxy) is not installed"
    )
    assert fix.startswith("fix: install it (Debian: apt-get install socat); or, knowing")
    assert fix.endswith("set unsafe_agent_network = true")


def test_a_harness_whose_node_the_sandbox_hides_fails_to_start(
    world: RunWorld, tmp_path: Path
) -> None:
    """codex (a node script) answers `--version` in thirdshift's own environment but not
    sealed: its node lies in thirdshift's home, which the agent sandbox hides, so every
    Session would fail."""
    hidden_bin = world.home / "node-bin"
    hidden_bin.mkdir(parents=True, exist_ok=True)
    node = shutil.which("node")
    assert node, "node is needed on this machine"
    if not (hidden_bin / "node").exists():
        (hidden_bin / "node").symlink_to(node)
    path = os.pathsep.join([str(hidden_bin), path_of(tmp_path, "git", "bwrap", "cat")])
    result = doctor(world, PATH=path, THIRDSHIFT_HARNESS="codex")
    assert result.returncode == 1
    codex, fix = line(result, "harness codex")
    assert codex.startswith("FAIL  harness codex: codex-cli 0.169.0 at ")
    assert ", but it does not start in the agent sandbox: `codex --version` failed (" in codex
    assert fix.startswith("fix: install it and what it runs on (node) outside the directories")


def test_a_test_session_asks_the_model_once_and_a_refusing_provider_fails_it(
    world: RunWorld,
) -> None:
    """--session: the real claude CLI runs one tiny session in the agent sandbox against the
    scripted model and answers (PASS with its answer); with the provider refusing the key
    (401), the session check FAILs naming it and what to check."""
    before = len(world.model.requests())

    result = doctor(world, "--session")

    assert result.returncode == 0, result.stdout + result.stderr
    session, _ = line(result, "session claude")
    assert session.startswith("PASS  session claude: answered in ")
    asked = world.model.requests()[before:]
    assert asked
    assert "This is a test by thirdshift doctor" in json.dumps(asked[0]["body"])

    world.restart_model(
        ModelScript.from_dict(
            {
                "sessions": [
                    {
                        "name": "doctor",
                        "marker": "thirdshift doctor",
                        "turns": [
                            {"error": "api_error", "status": 401, "message": "invalid x-api-key"}
                        ]
                        * 3,
                    }
                ]
            }
        )
    )
    refused = doctor(world, "--session", CLAUDE_CODE_MAX_RETRIES="1")

    assert refused.returncode == 1
    failed, fix = line(refused, "session claude")
    assert failed.startswith("FAIL  session claude: a test session of claude failed: ")
    assert "401" in failed or "invalid x-api-key" in failed
    assert fix.startswith("fix: check its model provider's key, quota and network")


def test_qwen_starts_sealed_and_its_test_session_answers(world: RunWorld) -> None:
    """With the harness qwen, `harness qwen` starts the real qwen sealed and --session has it
    answer the scripted model from the agent sandbox, through the egress proxy."""
    world.restart_model(
        ModelScript.from_dict(
            {
                "sessions": [
                    {"name": "doctor", "marker": "thirdshift doctor", "turns": [{"text": "OK"}]}
                ]
            }
        )
    )

    result = doctor(world, "--session", THIRDSHIFT_HARNESS="qwen")

    assert result.returncode == 0, result.stdout + result.stderr
    harness, _ = line(result, "harness qwen")
    assert harness.startswith("PASS  harness qwen: 0.24.4 at ")
    session, _ = line(result, "session qwen")
    assert session.startswith("PASS  session qwen: answered in ")
    assert "'OK'" in session
    [asked] = world.model_requests("doctor")
    assert "This is a test by thirdshift doctor" in json.dumps(asked["body"])


def test_a_token_with_the_workflow_scope_warns_and_its_scopes_are_named(world: RunWorld) -> None:
    """The stand-in names a classic token's scopes in X-OAuth-Scopes, as GitHub does; the
    doctor reads them the way a Run's adapter asks GitHub."""
    assert line(doctor(world), "workflow writes")[0] == (
        "PASS  workflow writes: the credentials may not write workflow files (its scopes: repo)"
    )
    world.client.add_user("maintainer", TOKEN, {REPO: "admin"}, scopes=["repo", "workflow"])
    try:
        result = doctor(world)
    finally:
        world.client.add_user("maintainer", TOKEN, {REPO: "admin"})

    warning, fix = line(result, "workflow writes")
    assert warning.startswith(
        "WARN  workflow writes: the credentials may write workflow files (its scopes: repo, "
        "workflow): only thirdshift's pre-push check keeps an agent's workflow off GitHub"
    )
    assert "without the workflow scope" in fix


def test_opencode_starts_sealed_and_its_test_session_answers(world: RunWorld) -> None:
    """With OpenCode as the Harness, doctor starts it sealed (its version) and --session asks
    the real CLI, configured inline, for its answer through the egress proxy."""
    world.restart_model(ModelScript.from_dict({"sessions": []}))
    before = len(world.model.requests())

    result = doctor(
        world, "--session", THIRDSHIFT_HARNESS="opencode", **opencode_env(world.model.url)
    )

    assert result.returncode == 0, result.stdout + result.stderr
    harness, _ = line(result, "harness opencode")
    assert harness.startswith("PASS  harness opencode: 1.18.33 at ")
    assert harness.endswith("; starts sealed in the agent sandbox, as a Session does")
    session, _ = line(result, "session opencode")
    assert session.startswith("PASS  session opencode: answered in ")
    asked = world.model.requests()[before:]
    assert len(asked) == 1  # the test prompt alone: no title request of OpenCode's own
    assert "This is a test by thirdshift doctor" in json.dumps(asked[0]["body"])
