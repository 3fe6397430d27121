"""GitHub Actions: which events start a Run, the runner's language, and the workflow file,
checked against GitHub's published payloads and schemas and against actionlint."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.actions_tools import actionlint, check_issues_payload, labelled, zizmor
from tests.support.npm_locks import expected_locks
from thirdshift.actions import Runner, decide
from thirdshift.actions.pins import harness_lock
from thirdshift.actions.workflow import WorkflowChoices, fitted, timeout_minutes, workflow_text
from thirdshift.console import Progress
from thirdshift.harness_registry import HARNESS_NAMES, HARNESSES

READY = "ready-for-agent"
WEB = "https://github.example"


def payload(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "label": READY,
        "sender": "maintainer",
        "owner": "acme",
        "name": "calculator",
        "number": 7,
        "web_url": WEB,
    }
    return labelled(**{**fields, **changes})


# -- events -------------------------------------------------------------------------------


def test_the_ready_label_added_to_an_issue_asks_for_a_run() -> None:
    decision = decide(payload(), READY)
    assert decision.runs
    assert (decision.owner, decision.name, decision.number, decision.sender) == (
        "acme",
        "calculator",
        7,
        "maintainer",
    )
    assert decision.html_url == f"{WEB}/acme/calculator/issues/7"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"label": "bug"}, "the label added is 'bug', not 'ready-for-agent'"),
        ({"action": "unlabeled"}, "the event's action is 'unlabeled'; only 'labeled' starts a Run"),
        ({"pull_request": True}, "#7 is a pull request, not an issue"),
    ],
)
def test_other_events_start_nothing_and_say_why(changes: dict[str, Any], why: str) -> None:
    decision = decide(payload(**changes), READY)
    assert not decision.runs
    assert decision.why == why


def test_a_run_asked_for_by_hand_names_its_issue_and_needs_no_label() -> None:
    dispatch: dict[str, Any] = {
        "inputs": {"issue": "12"},
        "repository": {"full_name": "acme/calculator"},
        "sender": {"login": "maintainer"},
    }
    decision = decide(dispatch, READY, "workflow_dispatch")
    assert (decision.number, decision.sender, decision.labelled) == (12, "maintainer", False)


@pytest.mark.parametrize(
    ("repository", "public"),
    [
        ({"private": False, "visibility": "public"}, True),
        ({"private": True, "visibility": "private"}, False),
        ({"private": True, "visibility": "internal"}, False),
        ({}, True),
        ({"private": "true"}, True),
    ],
    ids=["public", "private", "internal", "unsaid", "not a boolean"],
)
def test_a_repository_is_public_unless_its_event_says_private(
    repository: dict[str, Any], public: bool
) -> None:
    """Its Session logs are kept as an artifact only then: anyone may download a public
    repository's artifacts, and an event that does not say counts as public."""
    labelled_event = payload()
    labelled_event["repository"].pop("private")
    labelled_event["repository"].update(repository)
    dispatch: dict[str, Any] = {
        "inputs": {"issue": "12"},
        "repository": {"full_name": "acme/calculator", **repository},
        "sender": {"login": "maintainer"},
    }
    assert decide(labelled_event, READY).public is public
    assert decide(dispatch, READY, "workflow_dispatch").public is public


@pytest.mark.parametrize("typed", ["12; rm -rf /", " 12", "012", "\u00b2", "9" * 40])
def test_an_issue_input_that_is_not_plain_digits_starts_nothing(typed: str) -> None:
    """Only the number as GitHub would key its concurrency group by it: no space, sign, zero
    in front, other digits than ASCII, or absurd length."""
    dispatch = {
        "inputs": {"issue": typed},
        "repository": {"full_name": "acme/calculator"},
        "sender": {"login": "maintainer"},
    }
    assert decide(dispatch, READY, "workflow_dispatch").why == (
        f"the input issue is {typed!r}, not a number"
    )


def test_the_runner_s_event_name_decides_how_the_payload_is_read() -> None:
    """An issues event whose payload happened to carry an ``inputs`` key is still read as an
    issues event; any other event starts nothing."""
    labelled_with_inputs = {**payload(), "inputs": {"issue": "3"}}
    assert decide(labelled_with_inputs, READY, "issues").number == 7
    assert (
        decide(payload(), READY, "push").why
        == "the event is push; thirdshift runs on issues events"
    )
    assert decide(payload(), READY, "workflow_dispatch").why == (
        "the workflow was started without an issue input"
    )


def test_an_issue_number_that_is_not_a_number_starts_nothing() -> None:
    odd = payload()
    odd["issue"]["number"] = True
    assert decide(odd, READY).why == "the event names no issue number"


def test_an_event_that_is_not_about_an_issue_starts_nothing() -> None:
    push = {
        "ref": "refs/heads/main",
        "repository": {"full_name": "acme/calculator"},
        "sender": {"login": "maintainer"},
    }
    assert (
        decide(push, READY).why
        == "the event is not about an issue; thirdshift runs on issues events"
    )


def test_the_payloads_the_tests_use_keep_github_s_shape() -> None:
    """The schema check is real: a payload without its sender is refused."""
    broken = payload()
    del broken["sender"]
    with pytest.raises(jsonschema.ValidationError):
        check_issues_payload(broken)


# -- the runner ---------------------------------------------------------------------------


def test_workflow_commands_escape_what_could_start_another_command(tmp_path: Path) -> None:
    lines: list[str] = []
    runner = Runner({}, lines.append)
    runner.error("bad\n::add-mask::secret 100%", title="a: b, c")
    runner.group("Run on acme/calculator#7")
    runner.end_group()
    assert lines == [
        "::error title=a%3A b%2C c::bad%0A::add-mask::secret 100%25",
        "::group::Run on acme/calculator#7",
        "::endgroup::",
    ]


def test_the_summary_and_outputs_go_to_the_files_the_runner_names(tmp_path: Path) -> None:
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    runner = Runner(
        {
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_SERVER_URL": WEB,
            "GITHUB_REPOSITORY": "acme/calculator",
            "GITHUB_RUN_ID": "42",
        },
        lambda line: None,
    )
    runner.summary("### done")
    runner.output("pull-request-url", "https://x/pull/2\ninjected=1")
    assert summary.read_text() == "### done\n"
    assert output.read_text() == "pull-request-url=https://x/pull/2 injected=1\n"
    assert runner.job_url == f"{WEB}/acme/calculator/actions/runs/42"


def test_off_a_runner_there_is_no_job_and_nothing_is_written(tmp_path: Path) -> None:
    runner = Runner({}, lambda line: None)
    runner.summary("x")
    runner.output("a", "b")
    assert runner.job_url is None
    assert not Runner.detected({})
    assert Runner.detected({"GITHUB_ACTIONS": "true"})


# -- the workflow file --------------------------------------------------------------------

CHOICES = WorkflowChoices(install="thirdshift==0.1.0")


def test_the_workflow_passes_actionlint() -> None:
    assert actionlint(workflow_text(CHOICES)) == []


def test_actionlint_does_find_a_broken_workflow() -> None:
    """The check can fail: an expression on an unknown context is reported."""
    broken = workflow_text(CHOICES).replace("secrets.GITHUB_TOKEN", "secret.GITHUB_TOKEN")
    found = actionlint(broken)
    assert found
    assert any("secret" in problem["message"] for problem in found)


def test_the_workflow_queues_a_second_run_on_an_issue_and_covers_a_whole_run() -> None:
    parsed = yaml.safe_load(workflow_text(CHOICES))
    job = parsed["jobs"]["run"]
    # On the job: runs other labels start are skipped before joining the group.
    assert "concurrency" not in parsed
    assert job["concurrency"] == {
        "group": "thirdshift-issue-${{ github.event.issue.number || inputs.issue }}",
        "cancel-in-progress": False,
    }
    [step] = [step for step in job["steps"] if step.get("id") == "thirdshift"]
    env = step["env"]
    wall, ci = (float(env[f"THIRDSHIFT_{k}_SECONDS"]) for k in ("SESSION_WALL", "CI_TIMEOUT"))
    # The defaults (4 h and 3 h) do not fit a hosted job's 6 hours: both come down, and the job
    # still lasts longer than a whole Run.
    assert (wall, ci) == (188 * 60, 142 * 60)
    assert job["timeout-minutes"] == 360 >= (wall + ci) / 60 + 30
    assert parsed["permissions"] == {}
    assert job["permissions"] == {
        "contents": "write",
        "issues": "write",
        "pull-requests": "write",
        "checks": "read",
        "statuses": "read",
        "actions": "write",  # a Check re-run re-runs an Actions job's failed jobs
    }
    upload = job["steps"][-1]
    assert upload["uses"].startswith("actions/upload-artifact@")
    # Whatever happened, and only where the artifact is not anyone's to download.
    assert upload["if"] == "always() && github.event.repository.private == true"


def test_no_expression_reaches_a_shell_script_directly() -> None:
    """Every value reaches a run: script through its environment, so an issue's text can
    never become shell code."""
    steps = yaml.safe_load(workflow_text(CHOICES))["jobs"]["run"]["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    assert len(scripts) == 2
    assert all("${{" not in script for script in scripts)
    assert all("npm install" not in script for script in scripts)


def test_the_runner_gets_the_labels_and_limits_the_file_was_written_for() -> None:
    """A label with YAML's own punctuation stays one string, the job's condition and the
    Run's settings agree, and the file still passes actionlint."""
    choices = WorkflowChoices(
        install="thirdshift",
        ready_label="status: ready #now",
        in_progress_label="wip",
        session_wall_seconds=4 * 3600,
        ci_timeout_seconds=3600,
    )
    text = workflow_text(choices)
    job = yaml.safe_load(text)["jobs"]["run"]
    assert job["if"].endswith("github.event.label.name == 'status: ready #now'")
    [step] = [step for step in job["steps"] if step.get("id") == "thirdshift"]
    assert step["env"]["THIRDSHIFT_READY_LABEL"] == "status: ready #now"
    assert step["env"]["THIRDSHIFT_IN_PROGRESS_LABEL"] == "wip"
    assert step["env"]["THIRDSHIFT_SESSION_WALL_SECONDS"] == "14400"
    assert step["run"].splitlines()[-1] == 'exec thirdshift run --event "$GITHUB_EVENT_PATH"'
    assert actionlint(text) == []


def test_on_a_runner_no_progress_line_can_start_another_line() -> None:
    stream = io.StringIO()
    Progress(stream, one_line=True)("read a\n::add-mask::x\rb\u2028c")
    [line] = stream.getvalue().splitlines()
    assert "::add-mask::" in line
    assert not line.split("] ", 1)[1].startswith("::")


def test_limits_that_fit_a_hosted_job_are_written_as_they_are() -> None:
    """An hour each, with the margin, fits in 6 hours: nothing is lowered, and the job lasts
    the whole Run."""
    choices = WorkflowChoices(
        install="thirdshift", session_wall_seconds=3600, ci_timeout_seconds=3600
    )
    assert fitted(choices) == choices
    assert timeout_minutes(choices) == 150


@pytest.mark.parametrize(("wall", "ci"), [(4 * 3600, 3 * 3600), (10 * 3600, 60), (61, 9 * 3600)])
def test_limits_past_a_hosted_job_are_lowered_in_proportion_so_the_job_outlasts_the_run(
    wall: float, ci: float
) -> None:
    lowered = fitted(WorkflowChoices(install="x", session_wall_seconds=wall, ci_timeout_seconds=ci))
    assert timeout_minutes(lowered) <= 360
    total = lowered.session_wall_seconds + lowered.ci_timeout_seconds
    assert total / 60 + 30 <= timeout_minutes(lowered)
    assert lowered.session_wall_seconds % 60 == 0
    assert lowered.session_wall_seconds > 0
    assert lowered.ci_timeout_seconds > 0
    assert abs(lowered.session_wall_seconds / total - wall / (wall + ci)) < 0.01


def test_actions_init_writes_a_linted_workflow_pinned_to_this_version_and_keeps_an_existing_one(
    tmp_path: Path,
) -> None:
    """The command as a user runs it: the file goes under --path, passes actionlint as
    written, pins thirdshift to this version, lowers the default limits with a note saying
    so, and is not replaced without --force."""
    from click.testing import CliRunner

    from thirdshift import __version__
    from thirdshift.cli import main

    env = {"THIRDSHIFT_HOME": str(tmp_path / "home")}
    first = CliRunner().invoke(main, ["actions", "init", "--path", str(tmp_path)], env=env)
    assert first.exit_code == 0, first.output
    target = tmp_path / ".github" / "workflows" / "thirdshift.yml"
    assert first.stdout.strip() == str(target)
    assert "the workflow lowers them to 3h 08m and 2h 22m" in first.stderr
    text = target.read_text()
    assert actionlint(text) == []
    assert f"thirdshift=={__version__}" in text
    assert "npm ci --prefix .github/thirdshift" in text
    lock_dir = tmp_path / ".github" / "thirdshift"
    manifest = json.loads((lock_dir / "package.json").read_text())
    assert manifest["dependencies"] == {"@anthropic-ai/claude-code": "2.1.328"}
    lock = json.loads((lock_dir / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == manifest["dependencies"]

    again = CliRunner().invoke(main, ["actions", "init", "--path", str(tmp_path)], env=env)
    assert again.exit_code == 1
    assert "already exists; pass --force to replace it" in again.stderr
    assert target.read_text() == text
    forced = CliRunner().invoke(
        main, ["actions", "init", "--path", str(tmp_path), "--force", "--harness", "codex"], env=env
    )
    assert forced.exit_code == 0, forced.output
    assert json.loads((lock_dir / "package.json").read_text())["dependencies"] == {
        "@openai/codex": "0.169.0"
    }


# -- the workflow's supply chain (adr/0036) ----------------------------------------------

EVERY_WORKFLOW = [
    *(
        pytest.param(WorkflowChoices(install="thirdshift==0.1.0", harness=name), id=name)
        for name in HARNESS_NAMES
    ),
    # What a user may choose: a label with quotes and YAML's punctuation, short limits.
    pytest.param(
        WorkflowChoices(
            install="thirdshift @ git+https://example.com/thirdshift.git",
            ready_label="it's ready: #now",
            in_progress_label="wip",
            session_wall_seconds=3600,
            ci_timeout_seconds=600,
        ),
        id="chosen-labels-and-limits",
    ),
]


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".github" / "workflows" / "thirdshift.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("choices", EVERY_WORKFLOW)
def test_every_workflow_actions_init_writes_passes_zizmor_and_actionlint(
    tmp_path: Path, choices: WorkflowChoices
) -> None:
    """Each Harness's workflow (one file serves an App and the workflow's token alike) has no
    finding from zizmor's default persona nor from actionlint."""
    text = workflow_text(choices)
    assert zizmor(_written(tmp_path, text)) == []
    assert actionlint(text) == []


def test_zizmor_does_find_an_action_pinned_by_tag(tmp_path: Path) -> None:
    """The check can fail: the same file with one action pinned by its tag is reported."""
    text = re.sub(
        r"actions/checkout@[0-9a-f]{40} # (v\d+)\S*", r"actions/checkout@\1", workflow_text(CHOICES)
    )
    found = zizmor(_written(tmp_path, text))
    assert [finding["ident"] for finding in found] == ["unpinned-uses"]


def test_this_repository_s_ci_workflow_passes_zizmor() -> None:
    ci = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "ci.yml"
    assert zizmor(ci) == []


@pytest.mark.parametrize("choices", EVERY_WORKFLOW)
def test_every_action_is_pinned_to_a_commit_with_its_release_beside_it(
    choices: WorkflowChoices,
) -> None:
    """A full 40-hex commit SHA, never a tag or branch, and the release it was as a comment."""
    uses = [line for line in workflow_text(choices).splitlines() if re.match(r" +(- )?uses:", line)]
    assert len(uses) == 4
    for line in uses:
        assert re.fullmatch(r" +(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), (
            line
        )


def test_permissions_are_the_job_s_and_none_is_workflow_wide() -> None:
    """The workflow grants nothing; the job's grants each say what they are for."""
    text = workflow_text(CHOICES)
    assert yaml.safe_load(text)["permissions"] == {}
    block = text.split("    permissions:\n", 1)[1].split("    env:", 1)[0]
    assert all("  # " in line for line in block.splitlines())


def test_the_shipped_npm_locks_are_the_ones_the_tests_install() -> None:
    """Each Harness's lock holds exactly the packages and hashes of this repository's
    package-lock.json (after a version change: python -m tests.support.npm_locks)."""
    expected = expected_locks()
    assert sorted(expected) == sorted(f"{entry.name}.json" for entry in HARNESSES)
    for entry in HARNESSES:
        assert harness_lock(entry) == expected[f"{entry.name}.json"], entry.name


UNWRITABLE = [
    pytest.param("ready\non: push", id="line-break"),
    pytest.param("ready\u2028jobs: {}", id="unicode-line-separator"),
    pytest.param("ready\rnow", id="carriage-return"),
    pytest.param("${{ secrets.ANTHROPIC_API_KEY }}", id="expression"),
]


@pytest.mark.parametrize("value", UNWRITABLE)
@pytest.mark.parametrize("field", ["ready_label", "in_progress_label", "install"])
def test_a_chosen_value_the_file_cannot_hold_as_text_is_refused_naming_the_fix(
    field: str, value: str
) -> None:
    """A line break would start YAML of its own and ``${{`` an expression GitHub evaluates
    with the secrets in reach: the workflow is not written, and the error says what to change."""
    from dataclasses import replace

    from thirdshift.errors import ConfigError

    chosen: dict[str, Any] = {field: value}
    choices = replace(WorkflowChoices(install="thirdshift==0.1.0"), **chosen)
    with pytest.raises(ConfigError, match=r"cannot hold as text; choose one without it \("):
        workflow_text(choices)


def test_actions_init_refuses_a_ready_label_with_a_line_break_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """The command names the setting to change, exits 1, and leaves the repository as it was."""
    from click.testing import CliRunner

    from thirdshift.cli import main

    env = {
        "THIRDSHIFT_HOME": str(tmp_path / "home"),
        "THIRDSHIFT_READY_LABEL": "ready\non:\n  push:",
    }
    result = CliRunner().invoke(main, ["actions", "init", "--path", str(tmp_path)], env=env)
    assert result.exit_code == 1, result.output
    assert "THIRDSHIFT_READY_LABEL" in result.stderr
    assert not (tmp_path / ".github").exists()


@pytest.mark.parametrize("choices", EVERY_WORKFLOW)
def test_the_chosen_labels_and_install_reach_the_file_as_exactly_those_strings(
    choices: WorkflowChoices,
) -> None:
    """What the user chose is read back from the YAML unchanged: no value escapes its place."""
    workflow = yaml.safe_load(workflow_text(choices))
    [run_step] = [s for s in workflow["jobs"]["run"]["steps"] if s.get("id") == "thirdshift"]
    assert run_step["env"]["THIRDSHIFT_READY_LABEL"] == choices.ready_label
    assert run_step["env"]["THIRDSHIFT_IN_PROGRESS_LABEL"] == choices.in_progress_label
    [install] = [
        s for s in workflow["jobs"]["run"]["steps"] if "THIRDSHIFT_INSTALL" in s.get("env", {})
    ]
    assert install["env"]["THIRDSHIFT_INSTALL"] == choices.install
