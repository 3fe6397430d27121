"""The Qwen Code Harness adapter: argv, environment, private home, stop signals, and its stream
reader on transcripts captured from the pinned CLI (tests/fixtures/transcripts/capture.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from thirdshift.bootstrap.parts import hidden_from_agents
from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses import StreamOutcome, harness_named
from thirdshift.harnesses.qwen import QwenHarness, QwenReader
from thirdshift.records import SessionEvent, Usage
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
PROMPT = "Fix issue 7.\nThen commit."
SECRET = "sk-qwen-0123456789abcdef0123456789abcdef"


@pytest.fixture
def qwen() -> QwenHarness:
    return QwenHarness(executable="/opt/bin/qwen")


def replay(name: str) -> tuple[list[str], list[SessionEvent], StreamOutcome, str]:
    """Feed a capture to a fresh reader: its progress lines, events, outcome, stderr tail."""
    meta = json.loads((FIXTURES / f"{name}.meta.json").read_text())
    assert meta["harness"] == "qwen"
    reader = QwenHarness().reader()
    progress: list[str] = []
    events: list[SessionEvent] = []
    for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines():
        seen = reader.feed(line)
        progress += seen.progress
        events += seen.events
    outcome = reader.finish(meta["exit_status"], meta["stopped_after_result"])
    return progress, events, outcome, meta["stderr_tail"]


def feed(reader: QwenReader, *events: dict[str, Any]) -> None:
    for event in events:
        reader.feed(json.dumps(event).encode())


# -- argv, environment, home ---------------------------------------------------------------------


def test_a_fresh_session_runs_headless_with_stream_json_and_no_approvals(
    qwen: QwenHarness,
) -> None:
    """The prompt is one argv element; stream-json, yolo approvals, the Anthropic provider by
    default, the Model when one is chosen, and no resume."""
    argv = qwen.argv(PROMPT, model="qwen3-coder-plus", resume_id=None)
    assert argv == [
        "/opt/bin/qwen",
        PROMPT,
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--auth-type",
        "anthropic",
        "--model",
        "qwen3-coder-plus",
    ]


def test_a_native_resume_names_the_session_and_no_model_when_none_is_chosen(
    qwen: QwenHarness,
) -> None:
    """A Resume passes ``--resume <id>``; without a Model the CLI's own default stands."""
    argv = qwen.argv("Carry on.", model=None, resume_id="1f0e")
    assert argv[-2:] == ["--resume", "1f0e"]
    assert "--model" not in argv


def test_options_naming_another_provider_replace_the_default_one() -> None:
    """``--auth-type openai`` among the options: the adapter adds no ``--auth-type`` of its
    own, and the OpenAI variables pass instead of the Anthropic ones."""
    harness = QwenHarness(executable="qwen", extra_args=("--auth-type", "openai"))
    argv = harness.argv(PROMPT, model=None, resume_id=None)
    assert argv.count("--auth-type") == 1
    assert argv[argv.index("--auth-type") + 1] == "openai"
    env = harness.environment(
        {
            "PATH": "/bin",
            "OPENAI_API_KEY": "k",
            "OPENAI_BASE_URL": "http://m",
            "ANTHROPIC_API_KEY": "a",
        }
    )
    assert env["OPENAI_API_KEY"] == "k"
    assert "ANTHROPIC_API_KEY" not in env
    explicit = QwenHarness(extra_args=("--auth-type", "anthropic"))
    assert explicit.argv(PROMPT, model=None, resume_id=None).count("--auth-type") == 1
    equals = QwenHarness(extra_args=("--auth-type=openai-responses",))
    assert equals.auth_type == "openai-responses"
    assert "anthropic" not in equals.argv(PROMPT, model=None, resume_id=None)


def test_the_environment_has_only_its_provider_s_variables_and_never_a_github_token(
    qwen: QwenHarness,
) -> None:
    """The Anthropic provider's variables pass; GitHub tokens, thirdshift's settings and the
    other provider's key do not; telemetry and usage statistics are off."""
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/op",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/",
        "ANTHROPIC_API_KEY": "sk-ant",
        "OPENAI_API_KEY": "sk-openai",
        "GITHUB_TOKEN": "ghp_x",
        "GH_TOKEN": "ghp_y",
        "THIRDSHIFT_DATABASE_URL": "postgresql://x",
        "AWS_SECRET_ACCESS_KEY": "aws",
    }
    env = qwen.environment(base)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/"
    for absent in ("OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "THIRDSHIFT_DATABASE_URL"):
        assert absent not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["QWEN_TELEMETRY_ENABLED"] == "false"
    assert env["QWEN_USAGE_STATISTICS_ENABLED"] == "false"
    assert env["QWEN_CODE_NO_RELAUNCH"] == "true"


def test_the_private_home_gets_thirdshift_s_settings_and_none_of_the_operator_s(
    qwen: QwenHarness, tmp_path: Path
) -> None:
    """The operator's ~/.qwen (settings with keys, transcripts) stays behind; the private
    home's settings turn off updates, telemetry and memory extraction, bound qwen's retries
    (the Harness switch does the rest), and QWEN_HOME points at it."""
    operator = tmp_path / "operator"
    (operator / ".qwen" / "projects").mkdir(parents=True)
    (operator / ".qwen" / "settings.json").write_text('{"env": {"KEY": "secret"}}')
    home = tmp_path / "agent"
    variables = qwen.private_home({"HOME": str(operator)}, home)
    assert variables == {"HOME": str(home), "QWEN_HOME": str(home / ".qwen")}
    settings = json.loads((home / ".qwen" / "settings.json").read_text())
    assert settings["memory"]["enableManagedAutoMemory"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    retries = settings["model"]["generationConfig"]
    assert retries["maxRetries"] <= 3
    assert retries["retryMaxDelayMs"] <= 30_000
    assert "env" not in settings
    assert not (home / ".qwen" / "projects").exists()


def test_the_private_home_rewrites_settings_the_agent_changed_but_never_through_a_link(
    qwen: QwenHarness, tmp_path: Path
) -> None:
    """A Resume's home keeps its transcripts but gets thirdshift's settings again; a link the
    agent left in their place is refused with the fix, and its target is untouched."""
    home = tmp_path / "agent"
    qwen.private_home({}, home)
    settings = home / ".qwen" / "settings.json"
    settings.write_text('{"telemetry": {"enabled": true}}')
    qwen.private_home({}, home)
    assert json.loads(settings.read_text())["telemetry"]["enabled"] is False
    target = tmp_path / "daemon-file"
    target.write_text("mine")
    settings.unlink()
    settings.symlink_to(target)
    with pytest.raises(ThirdshiftError, match="a link is refused"):
        qwen.private_home({}, home)
    assert target.read_text() == "mine"


def test_sigterm_stops_it(qwen: QwenHarness) -> None:
    """SIGTERM ends qwen and the shells it started (the capture below shows it)."""
    assert list(qwen.stop_signals) == [signal.SIGTERM]


def test_the_egress_proxy_lets_it_reach_its_provider_and_the_configured_base_url(
    qwen: QwenHarness,
) -> None:
    """Anthropic's API and the base URL the operator configured; with the OpenAI provider,
    OpenAI's and its base URL instead."""
    found = qwen.provider_endpoints({"ANTHROPIC_BASE_URL": "http://127.0.0.1:8123"})
    assert [(p.host, p.port) for p in found] == [("api.anthropic.com", 443), ("127.0.0.1", 8123)]
    openai = QwenHarness(extra_args=("--auth-type", "openai"))
    found = openai.provider_endpoints({"OPENAI_BASE_URL": "https://llm.example:8443/v1"})
    assert [(p.host, p.port) for p in found] == [("api.openai.com", 443), ("llm.example", 8443)]


def test_harness_named_builds_it_from_the_registry() -> None:
    """``qwen`` is a registered Harness; it prices its tokens itself (no cost reported)."""
    harness = harness_named("qwen", executable="/x/qwen")
    assert isinstance(harness, QwenHarness)
    assert harness.executable == "/x/qwen"
    assert harness.reports_cost is False


# -- the reader on captured transcripts ------------------------------------------------------


def test_a_captured_tool_session_reads_as_progress_events_and_a_final_message() -> None:
    """Reads, edits, writes, a failing command with its exit status, a search, a commit, and
    the final message; usage, model and version from the stream."""
    progress, events, outcome, _ = replay("qwen-0.24.4-captured-tools")
    assert progress[0] == "session started"
    assert progress[1] == "read_file /home/dev/qwen-0.24.4-captured-tools/README.md"
    assert "edit /home/dev/qwen-0.24.4-captured-tools/README.md" in progress
    assert "write_file /home/dev/qwen-0.24.4-captured-tools/NOTES.md" in progress
    assert any(line.startswith("$ ls no-such-file") for line in progress)
    failed = [e for e in events if e.kind == "tool_result" and e.tool == "run_shell_command"]
    assert failed[0].exit_status == 2
    assert failed[0].summary.startswith("failed: Command: ls no-such-file")
    assert failed[1].exit_status == 0
    assert [e.kind for e in events][-1] == "result"
    assert not outcome.failed
    assert outcome.final_message == "Committed the README change.\nAll done."
    assert outcome.session_id == "03c67dc7-bcaf-4e0b-a887-9935877dd581"
    assert outcome.killed_work == ()
    assert outcome.usage == Usage(
        turns=5,
        input_tokens=136257,
        cached_input_tokens=0,
        output_tokens=233,
        model="coder-model",
        cli_version="0.24.4",
    )
    assert outcome.provider_outage is None


def test_a_background_shell_counts_as_killed_when_the_process_ends() -> None:
    """qwen ends its background shells when it exits after its result and never says whether
    they had finished: each is killed work, named by its command."""
    _, events, outcome, _ = replay("qwen-0.24.4-captured-background")
    assert not outcome.failed
    assert outcome.killed_work == ("sleep 45 && echo finished",)
    assert any(e.summary.endswith("(in the background)") for e in events)


def test_a_native_resume_keeps_the_session_id_and_counts_only_its_own_tokens() -> None:
    """The resumed process says the same session id; its result counts the resumed session's
    tokens too, which ``resume_usage`` takes off."""
    _, _, first, _ = replay("qwen-0.24.4-captured-background")
    _, _, resumed, _ = replay("qwen-0.24.4-captured-resume")
    assert resumed.session_id == first.session_id
    assert resumed.final_message == "Resumed: the tests ran in the foreground and passed."
    own = QwenHarness().resume_usage(resumed.usage, first.usage)
    assert own.input_tokens == 80961 - 53717
    assert own.output_tokens == 56 - 39


def test_an_unknown_resume_id_is_recognised_from_stderr() -> None:
    """No stdout, exit 1 and "No saved session found" on stderr: the Resume falls back to a
    fresh session with the preamble."""
    progress, _, outcome, stderr = replay("qwen-0.24.4-captured-resume-unknown-id")
    assert progress == []
    assert outcome.failed
    assert outcome.failure_cause == "qwen exited 1"
    assert QwenHarness().resume_unknown(outcome, stderr)
    _, _, fine, fine_stderr = replay("qwen-0.24.4-captured-resume")
    assert not QwenHarness().resume_unknown(fine, fine_stderr)


def test_a_session_stopped_mid_turn_fails_naming_the_signal() -> None:
    """SIGTERM before any result: a failed session, with the session id it had said."""
    _, _, outcome, _ = replay("qwen-0.24.4-captured-stopped-mid-turn")
    assert outcome.failed
    assert outcome.failure_cause == "qwen exited by signal SIGTERM"
    assert outcome.session_id
    assert outcome.provider_outage is None


@pytest.mark.parametrize(
    ("capture", "status"),
    [
        ("qwen-0.24.4-captured-overloaded-after-retries", 529),
        ("qwen-0.24.4-captured-rate-limited-after-retries", 429),
    ],
)
def test_a_captured_outage_after_its_retries_is_a_provider_outage(
    capture: str, status: int
) -> None:
    """Every request refused: after its own (bounded) retries qwen prints one error result and
    exits 1; the Run may switch Harness."""
    _, events, outcome, _ = replay(capture)
    assert outcome.failed
    assert outcome.result_seen
    assert (outcome.failure_cause or "").startswith(
        f"qwen's turn failed: error_during_execution: [API Error: {status}"
    )
    assert outcome.provider_outage is not None
    assert outcome.provider_outage.status == status
    assert events[-1].kind == "error"


def test_an_error_result_naming_an_outage_status_is_a_provider_outage() -> None:
    """After its own retries qwen ends with an error result; 429, 503 and 529 are outages,
    other errors are plain failures."""
    for status, outage in ((529, True), (429, True), (401, False)):
        reader = QwenHarness().reader()
        feed(
            reader,
            {"type": "system", "subtype": "init", "session_id": "s"},
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "error": {"message": f"[API Error: {status} {{'retry after 503 s'}}]"},
            },
        )
        outcome = reader.finish(1, stopped_after_result=False)
        assert outcome.failed
        assert (outcome.provider_outage is not None) is outage
        if outage:
            assert outcome.provider_outage is not None
            assert outcome.provider_outage.status == status


def test_every_text_the_reader_cuts_is_scrubbed_first() -> None:
    """A secret in a command, a tool result and the result text never shows in progress lines
    or event summaries."""
    reader = QwenHarness().reader(scrub=Scrubber([SECRET]))
    seen: list[str] = []
    for event in (
        {"type": "system", "subtype": "init", "session_id": "s"},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "run_shell_command",
                        "input": {"command": f"curl -H 'x: {SECRET}' http://x"},
                    }
                ]
            },
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": SECRET}]
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": f"done {SECRET}"},
    ):
        observed = reader.feed(json.dumps(event).encode())
        seen += observed.progress
        seen += [e.summary for e in observed.events]
    assert seen
    assert all(SECRET not in text for text in seen)


def test_the_operator_s_qwen_home_is_hidden_from_every_agent(tmp_path: Path) -> None:
    """Like CLAUDE_CONFIG_DIR and CODEX_HOME, the operator's QWEN_HOME (its transcripts of
    other work, its settings' keys) is among what the agent sandbox hides."""
    settings = Settings(home=tmp_path / "home", database_url="sqlite:///:memory:")
    environ = {"HOME": str(tmp_path / "op"), "QWEN_HOME": str(tmp_path / "qwen-home")}
    assert tmp_path / "qwen-home" in hidden_from_agents(settings, environ)
