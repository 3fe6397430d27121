"""The pre-push check's workflow rule as pure functions: which paths CI would run, and which
repositories allow them to be pushed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from thirdshift.errors import ConfigError
from thirdshift.git import ChangedPath
from thirdshift.git.patches import changed_paths
from thirdshift.runs.secret_check import is_workflow_file, workflow_changes
from thirdshift.settings import load_settings


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        ".github/workflows/sub/x.yaml",
        ".github/workflows",
        ".github/actions/setup/run.sh",
        "action.yml",
        "deep/in/tree/action.yaml",
        ".GitHub/Workflows/ci.yml",
        "tools/Action.YML",
    ],
)
def test_workflow_and_action_files_are_workflow_files(path: str) -> None:
    assert is_workflow_file(path)


@pytest.mark.parametrize(
    "path",
    [
        ".github/CODEOWNERS",
        ".github/dependabot.yml",
        "docs/workflows/ci.yml",
        "my-action.yml",
        "action.yml.bak",
        ".github/workflowsx/ci.yml",
    ],
)
def test_other_files_are_not(path: str) -> None:
    assert not is_workflow_file(path)


def test_workflow_changes_are_named_once_in_the_order_first_touched() -> None:
    changes = [
        ChangedPath("c1", "app.py"),
        ChangedPath("c1", "b/action.yml"),
        ChangedPath("c2", ".github/workflows/ci.yml"),
        ChangedPath("c3", "b/action.yml"),
    ]
    assert workflow_changes(changes) == ("b/action.yml", ".github/workflows/ci.yml")


def test_a_path_that_looks_like_a_meta_line_or_a_commit_is_still_a_path() -> None:
    """The raw listing puts each path right after its meta token: a path of the agent's
    choosing (a colon first, a newline, hex) is never read as anything else."""
    meta = ":000000 100644 0000000 1234567 A"
    raw = "\0".join(
        ["c" * 40, "", meta, ":x/action.yml", f"\n{meta}", "\nab" * 20, f"\n{meta}", "ok.txt"]
    )
    assert [(c.commit, c.path) for c in changed_paths(raw + "\0")] == [
        ("c" * 40, ":x/action.yml"),
        ("c" * 40, "\nab" * 20),
        ("c" * 40, "ok.txt"),
    ]


def test_a_repositorys_own_setting_wins_over_the_global_one(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text(
        "allow_workflow_changes = true\n"
        "[allow_workflow_changes_by_repository]\n"
        '"acme/locked" = false\n'
        '"Acme/CI-Tools" = true\n'
    )
    settings = load_settings(os.environ)
    assert not settings.allow_workflow_changes_for("acme", "Locked")
    assert settings.allow_workflow_changes_for("acme", "ci-tools")
    assert settings.allow_workflow_changes_for("acme", "widgets")
    monkeypatch.setenv("THIRDSHIFT_ALLOW_WORKFLOW_CHANGES", "false")
    assert not load_settings(os.environ).allow_workflow_changes_for("acme", "widgets")


def test_workflow_changes_are_refused_unless_allowed(home: Path) -> None:
    assert not load_settings(os.environ).allow_workflow_changes_for("acme", "widgets")


def test_a_bad_repository_name_in_the_table_is_refused(home: Path) -> None:
    (home / "config.toml").write_text('[allow_workflow_changes_by_repository]\n"acme" = true\n')
    with pytest.raises(ConfigError, match="allow_workflow_changes_by_repository"):
        load_settings(os.environ)
