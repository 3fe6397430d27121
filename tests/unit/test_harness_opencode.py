"""The OpenCode Harness adapter: argv, environment, private home, stop signals, and its stream
reader on transcripts captured from the pinned CLI."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.secret_corpus import pieces
from thirdshift.harnesses import StreamOutcome, harness_named
from thirdshift.harnesses.opencode import (
    OpenCodeHarness,
    OpenCodeReader,
    config_secrets,
    configured_base_urls,
    unbundled_provider_packages,
)
from thirdshift.records import SessionEvent, Usage
from thirdshift.sandbox.model.opencode import opencode_env
from thirdshift.scrub import Scrubber

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
PREFIX = "opencode-1.18.33-captured-"
PROMPT = "Fix issue 7.\nThen commit."


def replay(name: str) -> tuple[list[str], list[SessionEvent], StreamOutcome, str]:
    """Feed a capture to a fresh reader: its progress lines, events, outcome, stderr tail."""
    meta = json.loads((FIXTURES / f"{PREFIX}{name}.meta.json").read_text())
    reader = OpenCodeHarness().reader()
    progress: list[str] = []
    events: list[SessionEvent] = []
    for line in (FIXTURES / f"{PREFIX}{name}.jsonl").read_bytes().splitlines():
        seen = reader.feed(line)
        progress += seen.progress
        events += seen.events
    outcome = reader.finish(meta["exit_status"], meta["stopped_after_result"])
    return progress, events, outcome, meta["stderr_tail"]


def feed(reader: OpenCodeReader, *events: dict[str, Any]) -> list[SessionEvent]:
    found: list[SessionEvent] = []
    for event in events:
        found += reader.feed(json.dumps(event).encode()).events
    return found


def step_finish(reason: str, **tokens: Any) -> dict[str, Any]:
    part = {"type": "step-finish", "reason": reason, "tokens": tokens, "cost": 0.5}
    return {"type": "step_finish", "sessionID": "ses_x", "part": part}


def test_fresh_argv_is_run_json_auto_with_a_fixed_title_and_the_prompt_after_dashes() -> None:
    """A fresh session: ``run --format json --auto``, a title (no title request), the prompt
    last after ``--`` so that a prompt starting with a dash is still the message."""
    argv = OpenCodeHarness(executable="/bin/opencode").argv(PROMPT, model=None, resume_id=None)
    assert argv == [
        "/bin/opencode",
        *("run", "--format", "json", "--auto", "--title", "thirdshift"),
        "--",
        PROMPT,
    ]


def test_resume_argv_names_the_session_and_a_bare_model_gets_the_anthropic_provider() -> None:
    """A native resume is ``--session <id>``; a model without its provider is Anthropic's."""
    argv = OpenCodeHarness().argv("-go on", model="claude-sonnet-4-5", resume_id="ses_abc")
    assert argv[-6:] == [
        "--model",
        "anthropic/claude-sonnet-4-5",
        "--session",
        "ses_abc",
        "--",
        "-go on",
    ]
    assert OpenCodeHarness().argv("p", model="local/qwen3", resume_id=None)[-4:-2] == [
        "--model",
        "local/qwen3",
    ]


def test_environment_keeps_the_allowlist_its_provider_and_turns_every_download_off() -> None:
    """Only its own and its provider's variables pass, never a GitHub token; the switches that
    keep it off the network (models list, updates, plugins, npm) are always set."""
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/dev",
        "GITHUB_TOKEN": "ghp_x",
        "THIRDSHIFT_DATABASE_URL": "postgresql://x",
        "AWS_SECRET_ACCESS_KEY": "s",
        "ANTHROPIC_API_KEY": "sk-ant",
        "OPENCODE_CONFIG_CONTENT": '{"provider": {"p": {"options": {"apiKey": "{env:P_KEY}"}}}}',
        "P_KEY": "k",
        "OPENCODE_SERVER_PASSWORD": "pw",
    }
    env = OpenCodeHarness().environment(base)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant"
    assert env["P_KEY"] == "k"
    for leak in ("GITHUB_TOKEN", "THIRDSHIFT_DATABASE_URL", "AWS_SECRET_ACCESS_KEY"):
        assert leak not in env
    assert "OPENCODE_SERVER_PASSWORD" not in env
    for switch in (
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_PROJECT_CONFIG",
        "OPENCODE_PURE",
    ):
        assert env[switch] == "1"
    assert env["npm_config_offline"] == "true"


@pytest.mark.parametrize(
    ("given", "passed"),
    [
        (None, {"snapshot": False}),
        ('{"model": "anthropic/m"}', {"model": "anthropic/m", "snapshot": False}),
        ('{"snapshot": true}', {"snapshot": True}),
    ],
)
def test_its_worktree_snapshots_are_off_unless_the_configuration_turns_them_on(
    given: str | None, passed: dict[str, object]
) -> None:
    """Each step's snapshot copies the Worktree into the private home, for an undo nobody runs
    headless; the inline configuration keeps every other key, and its own word on snapshots."""
    base = {} if given is None else {"OPENCODE_CONFIG_CONTENT": given}
    env = OpenCodeHarness().environment(base)
    assert json.loads(env["OPENCODE_CONFIG_CONTENT"]) == passed


def test_an_inline_configuration_that_is_no_json_object_is_passed_as_given() -> None:
    """OpenCode names what is wrong with it; thirdshift does not rewrite what it cannot read."""
    for given in ("not json", "[1, 2]"):
        env = OpenCodeHarness().environment({"OPENCODE_CONFIG_CONTENT": given})
        assert env["OPENCODE_CONFIG_CONTENT"] == given


def test_a_config_naming_its_key_variable_never_lets_a_github_token_through() -> None:
    """``{env:GITHUB_TOKEN}`` in the configuration does not make the token pass."""
    base = {"OPENCODE_CONFIG_CONTENT": '{"x": "{env:GITHUB_TOKEN}"}', "GITHUB_TOKEN": "ghp_x"}
    assert "GITHUB_TOKEN" not in OpenCodeHarness().environment(base)


def test_private_home_moves_every_xdg_directory_in_and_copies_only_config_and_login(
    tmp_path: Path,
) -> None:
    """Config and login are copied from the user's XDG directories; the sessions database and
    snapshots are not, so no transcript is shared between Runs."""
    user = tmp_path / "user"
    (user / ".config" / "opencode").mkdir(parents=True)
    (user / ".config" / "opencode" / "opencode.json").write_text("{}")
    data = user / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    (data / "auth.json").write_text('{"anthropic": {}}')
    (data / "opencode.db").write_text("sessions of other Runs")
    home = tmp_path / "agent"
    env = OpenCodeHarness().private_home({"HOME": str(user)}, home)
    assert env["HOME"] == str(home)
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        assert Path(env[key]).is_relative_to(home)
        assert Path(env[key]).is_dir()
    assert (Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").exists()
    assert (Path(env["XDG_DATA_HOME"]) / "opencode" / "auth.json").exists()
    assert not (Path(env["XDG_DATA_HOME"]) / "opencode" / "opencode.db").exists()


def test_provider_endpoints_are_anthropic_openai_and_each_configured_base_url() -> None:
    """The egress proxy lets a sealed session reach the base URL its configuration names."""
    env = opencode_env("http://127.0.0.1:4321")
    assert configured_base_urls(env) == ["http://127.0.0.1:4321/v1"]
    endpoints = OpenCodeHarness().provider_endpoints(env)
    assert ("127.0.0.1", 4321) in [(e.host, e.port) for e in endpoints]
    assert ("api.anthropic.com", 443) in [(e.host, e.port) for e in endpoints]


def test_a_provider_package_the_binary_lacks_is_named_as_a_registry_fetch() -> None:
    """Only the bundled provider packages may be named; another would be installed at run time."""
    config = {
        "provider": {
            "ok": {"npm": "@ai-sdk/openai-compatible"},
            "bad": {"npm": "ollama-ai-provider"},
        }
    }
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config)}
    assert unbundled_provider_packages(env) == ["ollama-ai-provider"]
    assert unbundled_provider_packages(opencode_env("http://127.0.0.1:1")) == []
    assert unbundled_provider_packages({"OPENCODE_CONFIG_CONTENT": "not json"}) == []


def test_stop_signals_are_sigint_then_sigterm_and_harness_named_builds_it() -> None:
    """Both signals end it at once; the registry builds this adapter for ``opencode``."""
    harness = harness_named("opencode", executable="/x/opencode")
    assert isinstance(harness, OpenCodeHarness)
    assert harness.executable == "/x/opencode"
    assert tuple(harness.stop_signals) == (signal.SIGINT, signal.SIGTERM)


def test_the_version_is_asked_of_the_cli_since_its_stream_names_none() -> None:
    """``opencode --version`` prints the bare version."""
    harness = OpenCodeHarness(executable="oc")
    assert harness.version_argv() == ["oc", "--version"]
    assert harness.parse_version("1.18.33\n") == "1.18.33"
    assert harness.parse_version("no version here") is None


def test_captured_tool_session_shows_reads_edits_failures_the_commit_and_usage() -> None:
    """Each tool is one call and one result; a failed read and a non-zero exit are shown; the
    final text is the final message; usage is the sum of the steps with OpenCode's cost."""
    progress, events, outcome, _ = replay("tools")
    assert progress[0] == "session started"
    assert outcome.session_id
    assert outcome.session_id.startswith("ses_")
    calls = [(e.tool, e.target) for e in events if e.kind == "tool_call"]
    assert [tool for tool, _ in calls] == ["read", "write", "edit", "read", "bash", "bash"]
    results = [e.summary for e in events if e.kind == "tool_result"]
    assert results[3].startswith("failed: File not found")
    assert results[4].startswith("exit 2: ls: cannot access")
    assert progress[-1] == "commit"  # the commit command, condensed
    assert outcome.final_message == "Committed the README change.\nAll done."
    assert not outcome.failed
    assert outcome.result_seen
    assert events[-1].kind == "result"
    assert outcome.usage.turns == 5
    assert (outcome.usage.input_tokens or 0) > 0
    assert (outcome.usage.output_tokens or 0) > 0
    assert outcome.usage.cost_source == "reported"
    assert (outcome.usage.cost_usd or 0) > 0


def test_resume_keeps_the_session_id_and_counts_only_its_own_steps() -> None:
    """A native resume streams the resumed session's id; its figures are its own steps."""
    _, _, first, _ = replay("tools")
    _, _, resumed, _ = replay("resume")
    assert resumed.session_id == first.session_id
    assert resumed.final_message == "Resumed: nothing was left to do."
    assert resumed.usage.turns == 1
    assert OpenCodeHarness().resume_usage(resumed.usage, first.usage) == resumed.usage


def test_unknown_resume_id_fails_and_is_recognised_from_stderr() -> None:
    """Nothing on stdout, exit 1, "Session not found" (in colour) on stderr."""
    _, events, outcome, stderr = replay("resume-unknown-id")
    assert events == []
    assert outcome.failed
    assert OpenCodeHarness().resume_unknown(outcome, stderr)
    assert not OpenCodeHarness().resume_unknown(outcome, "Error: something else")


@pytest.mark.parametrize(
    ("name", "status"), [("rate-limited", 429), ("overloaded-after-retries", 529)]
)
def test_provider_refusal_after_its_retries_is_an_outage(name: str, status: int) -> None:
    """The ``error`` line OpenCode prints once its retries are spent names the status."""
    _, events, outcome, _ = replay(name)
    assert outcome.failed
    assert outcome.provider_outage is not None
    assert outcome.provider_outage.status == status
    assert outcome.provider_outage.harness == "opencode"
    assert f"APIError {status}" in (outcome.failure_cause or "")
    assert [e.kind for e in events] == ["error"]


def test_an_error_that_is_no_outage_fails_without_switching_harness() -> None:
    """A 400 is the session's failure, not the provider's outage."""
    reader = OpenCodeHarness().reader()
    error = {"name": "APIError", "data": {"message": "bad request", "statusCode": 400}}
    feed(reader, {"type": "error", "sessionID": "ses_x", "error": error})
    outcome = reader.finish(1, False)
    assert outcome.failed
    assert outcome.provider_outage is None


def test_interrupted_session_fails_with_the_signal_and_keeps_its_id() -> None:
    """SIGINT mid-session: exit -2 after a tool-calls step, no result."""
    _, _, outcome, _ = replay("interrupted")
    assert outcome.failed
    assert not outcome.result_seen
    assert outcome.session_id is not None
    assert "signal" in (outcome.failure_cause or "").lower() or "SIGINT" in (
        outcome.failure_cause or ""
    )


def test_garbage_lines_never_crash_the_reader_nor_count() -> None:
    """Non-JSON, empty, JSON that is not an object, wrong types and unknown events are skipped."""
    reader = OpenCodeHarness().reader()
    for line in (
        b"",
        b"not json",
        b"[1, 2]",
        b"\xff\xfe",
        b'{"type": "tool_use", "part": "x"}',
        b'{"type": "tool_use", "part": {"state": []}}',
        b'{"type": "step_finish", "part": {"tokens": "many", "cost": "free"}}',
        b'{"type": "error", "error": 7}',
        b'{"type": "mystery", "sessionID": "ses_forged"}',
        b"{" * 10_000,
    ):
        reader.feed(line)
    assert reader.session_id is None
    assert reader.usage_so_far.input_tokens is None


def test_cache_reads_and_writes_count_as_input_and_reasoning_as_output() -> None:
    """Its ``input`` leaves the cache out; ours counts every input token."""
    reader = OpenCodeHarness().reader()
    feed(
        reader,
        step_finish("tool-calls", input=10, output=5, reasoning=2, cache={"read": 100, "write": 7}),
        step_finish("stop", input=3, output=1, reasoning=0, cache={"read": 0, "write": 0}),
    )
    usage = reader.usage_so_far
    assert usage == Usage(
        turns=2,
        input_tokens=120,
        cached_input_tokens=100,
        cache_write_tokens=7,
        output_tokens=8,
        cost_usd=1.0,
        cost_source="reported",
    )
    assert reader.result_seen


def test_a_zero_cost_is_no_cost_so_the_ledger_prices_the_tokens() -> None:
    """OpenCode states 0 for a model it has no price for: that is not a reported cost."""
    reader = OpenCodeHarness().reader()
    event = step_finish("stop", input=3, output=1)
    event["part"]["cost"] = 0
    feed(reader, event)
    assert reader.usage_so_far.cost_usd is None
    assert reader.usage_so_far.cost_source is None


def test_a_known_secret_across_the_cut_leaves_nothing_in_the_progress_or_the_events() -> None:
    """A secret straddling the cut of the progress line and of the result's summary is scrubbed
    before the cut: none of it is left."""
    secret = "sk-ant-api03-" + "A" * 90
    reader = OpenCodeHarness().reader(scrub=Scrubber([secret]))
    part = {
        "tool": "bash",
        "state": {
            "status": "completed",
            "input": {"command": "echo " + "x" * 85 + " " + secret},
            "output": "y" * 190 + " " + secret,
            "metadata": {"exit": 0},
        },
    }
    observed = reader.feed(json.dumps({"type": "tool_use", "part": part}).encode())
    call, result = observed.events
    for text in (*observed.progress, call.summary, call.target or "", result.summary):
        assert not any(piece in text for piece in pieces(secret, 4)), text


def test_a_provider_it_cannot_load_fails_naming_the_fix() -> None:
    """ "Failed to initialize provider" (a package it would have to install) names what to use."""
    reader = OpenCodeHarness().reader()
    error = {"name": "UnknownError", "data": {"message": "Failed to initialize provider: local"}}
    feed(reader, {"type": "error", "sessionID": "ses_x", "error": error})
    cause = reader.finish(1, False).failure_cause or ""
    assert "Failed to initialize provider: local" in cause
    assert "npm @ai-sdk/openai-compatible" in cause


def test_the_secrets_inside_its_inline_configuration_are_known_to_the_scrubber() -> None:
    """An apiKey, a token and an Authorization header inside OPENCODE_CONFIG_CONTENT are secrets
    (the variable's name says nothing of them); the base URL and the model are not."""
    config = {
        "model": "local/m",
        "provider": {
            "local": {
                "options": {
                    "baseURL": "http://127.0.0.1:9/v1",
                    "apiKey": "key-value-123456",
                    "headers": {"Authorization": "Bearer header-token-987654"},
                },
                "models": {"m": {"name": "M"}},
            }
        },
        "mcp": {"x": {"environment": {"SERVICE_TOKEN": "mcp-token-555555"}}},
    }
    found = config_secrets({"OPENCODE_CONFIG_CONTENT": json.dumps(config)})
    assert "key-value-123456" in found
    assert "header-token-987654" in found
    assert "mcp-token-555555" in found
    assert "http://127.0.0.1:9/v1" not in found
    assert "local/m" not in found
    scrub = Scrubber(found)
    assert "header-token-987654" not in scrub("curl -H 'x: header-token-987654'")
    assert config_secrets({}) == []


def test_without_a_provider_its_fallback_to_its_makers_service_fails_naming_the_fix() -> None:
    """With no provider it tries opencode.ai's own service: the cause says what to set."""
    reader = OpenCodeHarness().reader()
    data = {
        "message": "Cannot connect to API: Was there a typo in the url or port?",
        "metadata": {"url": "https://opencode.ai/zen/v1/chat/completions"},
    }
    feed(
        reader, {"type": "error", "sessionID": "ses_x", "error": {"name": "APIError", "data": data}}
    )
    cause = reader.finish(1, False).failure_cause or ""
    assert cause.endswith("(no model provider: set OPENCODE_CONFIG_CONTENT or ANTHROPIC_API_KEY)")
