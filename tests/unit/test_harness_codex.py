"""The Codex Harness adapter: argv, environment, stop signals, and its stream reader on real
transcripts (the shared samples and captures from the pinned CLI)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.secret_corpus import pieces
from thirdshift.harnesses import StreamOutcome, harness_named
from thirdshift.harnesses.codex import CodexHarness, CodexReader
from thirdshift.records import SessionEvent
from thirdshift.sandbox.model.server import SANDBOX_CODEX_KEY_VAR, codex_config_args
from thirdshift.scrub import Scrubber

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
PROMPT = "Fix issue 7.\nThen commit."
FLAGS = [
    "exec",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "-c",
    "analytics.enabled=false",
    "-c",
    "check_for_update_on_startup=false",
]


def replay(name: str) -> tuple[list[str], list[SessionEvent], StreamOutcome, str]:
    """Feed a fixture to a fresh reader: its progress lines, events, outcome, stderr tail."""
    meta = json.loads((FIXTURES / f"{name}.meta.json").read_text())
    reader = CodexHarness().reader()
    progress: list[str] = []
    events: list[SessionEvent] = []
    for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines():
        seen = reader.feed(line)
        progress += seen.progress
        events += seen.events
    outcome = reader.finish(meta["exit_status"], meta["stopped_after_result"])
    return progress, events, outcome, meta["stderr_tail"]


def feed(reader: CodexReader, *events: dict[str, Any]) -> list[str]:
    progress: list[str] = []
    for event in events:
        progress += reader.feed(json.dumps(event).encode()).progress
    return progress


def command(kind: str, item_id: str, cmd: str, **fields: Any) -> dict[str, Any]:
    item = {"id": item_id, "type": "command_execution", "command": cmd} | fields
    return {"type": kind, "item": item}


def message(text: str, item_id: str = "m") -> dict[str, Any]:
    return {
        "type": "item.completed",
        "item": {"id": item_id, "type": "agent_message", "text": text},
    }


STARTED = {"type": "thread.started", "thread_id": "t-1"}
TURN_DONE = {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}}


# --- argv, environment, signals -----------------------------------------------------------


def test_fresh_argv_is_exec_json_without_approvals_and_the_prompt_last() -> None:
    """A fresh session: exec --json, no approvals or sandbox, extra args, -m, the prompt."""
    codex = CodexHarness(executable="/opt/bin/codex", extra_args=("-c", "x=1"))
    assert codex.argv(PROMPT, model="gpt-5.5", resume_id=None) == [
        "/opt/bin/codex",
        *FLAGS,
        "-c",
        "x=1",
        "-m",
        "gpt-5.5",
        PROMPT,
    ]
    assert CodexHarness().argv("go", model=None, resume_id=None) == ["codex", *FLAGS, "go"]


def test_resume_argv_repeats_every_flag_before_resume_id_and_prompt() -> None:
    """Codex keeps no setting across a resume: all flags again, then resume <id> <prompt>."""
    codex = CodexHarness(extra_args=("-c", "x=1"))
    assert codex.argv("carry on", model="gpt-5.5", resume_id="0199-abc") == [
        "codex",
        *FLAGS,
        "-c",
        "x=1",
        "-m",
        "gpt-5.5",
        "resume",
        "0199-abc",
        "carry on",
    ]


def test_environment_keeps_only_the_allowlist_and_the_provider_variables() -> None:
    """GitHub tokens, THIRDSHIFT_* and foreign credentials never reach the CLI; provider vars do."""
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/agent",
        "LC_CTYPE": "C.UTF-8",
        "TMPDIR": "/tmp",
        "GIT_COMMITTER_EMAIL": "agent@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "CODEX_HOME": "/home/agent/.codex",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "GITHUB_TOKEN": "ghp_secret",
        "GH_TOKEN": "gho_secret",
        "THIRDSHIFT_GITHUB_TOKEN": "ghp_other",
        "THIRDSHIFT_DATABASE_URL": "postgresql://u:p@db/x",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "ANTHROPIC_API_KEY": "sk-ant",
    }
    env = CodexHarness().environment(base)
    assert env == {
        key: base[key]
        for key in (
            "PATH",
            "HOME",
            "LC_CTYPE",
            "TMPDIR",
            "GIT_COMMITTER_EMAIL",
            "GIT_CONFIG_NOSYSTEM",
            "CODEX_HOME",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        )
    }


def test_environment_passes_the_key_variable_of_a_provider_configured_in_extra_args() -> None:
    """The scripted model server's provider names its key variable; only that one passes."""
    extra = tuple(codex_config_args("http://127.0.0.1:9"))
    codex = CodexHarness(extra_args=extra)
    env = codex.environment(
        {SANDBOX_CODEX_KEY_VAR: "dummy", "THIRDSHIFT_HOME": "/x", "GITHUB_TOKEN": "ghp_x"}
    )
    assert env == {SANDBOX_CODEX_KEY_VAR: "dummy"}
    tricked = CodexHarness(extra_args=("-c", 'model_providers.p.env_key="GITHUB_TOKEN"'))
    assert tricked.environment({"GITHUB_TOKEN": "ghp_x"}) == {}


@pytest.mark.parametrize("variable", ["THIRDSHIFT_HTTP_TOKEN", "THIRDSHIFT_DATABASE_URL"])
def test_the_page_token_and_the_database_url_never_pass_even_named_as_a_provider_key(
    variable: str,
) -> None:
    """With the status page's token an agent reads what the daemon shows; with the database's
    URL it writes the daemon's records: no configuration hands either over."""
    tricked = CodexHarness(extra_args=("-c", f'model_providers.p.env_key="{variable}"'))
    assert tricked.environment({variable: "page-token-0123456789-abcdef"}) == {}


def test_stop_signals_are_sigint_then_sigterm() -> None:
    """SIGINT interrupts the turn cleanly; SIGTERM follows."""
    assert list(CodexHarness().stop_signals) == [signal.SIGINT, signal.SIGTERM]


def test_harness_named_builds_the_codex_adapter() -> None:
    """The registry hands out this adapter by name."""
    assert isinstance(harness_named("codex"), CodexHarness)


def test_the_cli_version_is_asked_of_codex_since_its_stream_names_none() -> None:
    """codex exec's stream carries no version: the ledger's comes from ``codex --version``,
    whose 0.169.0 output is ``codex-cli 0.169.0``."""
    harness = CodexHarness(executable="/opt/bin/codex")
    assert harness.version_argv() == ["/opt/bin/codex", "--version"]
    assert harness.parse_version("codex-cli 0.169.0\n") == "0.169.0"
    assert harness.parse_version("WARNING: proceeding\ncodex-cli 0.170.0-alpha.2\n") == (
        "0.170.0-alpha.2"
    )
    assert harness.parse_version("error: unexpected argument\n") is None


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("codex-*.jsonl")))
def test_no_recorded_codex_stream_names_its_version_or_model(name: str) -> None:
    """Why the version is asked for and the Model is the one requested: none of the recorded
    streams says either (a warning that names an unknown model is not a report of the one
    used)."""
    reader = CodexReader()
    for line in (FIXTURES / name).read_bytes().splitlines():
        reader.feed(line)
    usage = reader.finish(0, stopped_after_result=False).usage
    assert (usage.cli_version, usage.model) == (None, None)


# --- the reader on real transcripts ----------------------------------------------------------


def test_tool_session_sample_gives_id_progress_events_and_final_message() -> None:
    """The shared tool session: the wrapped command shown bare, its output, the message."""
    progress, events, outcome, _ = replay("codex-0.169.0-tool-session")
    assert progress == ["session started", "$ echo hi > codex.txt && cat codex.txt"]
    assert [(e.seq, e.kind, e.exit_status, e.summary) for e in events] == [
        (1, "error", None, events[0].summary),  # the harmless model-metadata warning
        (2, "tool_call", None, "$ echo hi > codex.txt && cat codex.txt"),
        (3, "tool_result", 0, "hi"),
        (4, "message", None, "Done codex"),
        (5, "result", None, "Done codex"),
    ]
    assert events[1].target == "echo hi > codex.txt && cat codex.txt"
    assert outcome.session_id == "01a228f1-67cb-7693-abe2-57d90b33f56b"
    assert outcome.final_message == "Done codex"
    assert not outcome.failed
    assert outcome.killed_work == ()
    assert outcome.result_seen
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (20, 10)


def test_captured_tool_session_shows_file_changes_failures_and_the_commit() -> None:
    """A patch shows one line per file, a failing command its exit status, a commit as such."""
    progress, events, outcome, _ = replay("codex-0.169.0-captured-tools")
    repo = "/home/dev/codex-0.169.0-captured-tools"
    assert progress == [
        "session started",
        f"Write {repo}/NOTES.md",
        f"Edit {repo}/README.md",
        "$ ls no-such-file",
        "commit",
    ]
    results = [(e.target, e.exit_status) for e in events if e.kind == "tool_result"]
    assert results[0] == ("ls no-such-file", 2)
    assert results[1][1] == 0
    assert "git commit" in (results[1][0] or "")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert outcome.final_message == "Committed the README change."
    assert not outcome.failed


@pytest.mark.parametrize(
    ("name", "work"),
    [
        ("codex-0.169.0-background-left-running", "sleep 600"),
        ("codex-0.169.0-captured-background-left-running", "sleep 45 && echo finished"),
    ],
)
def test_command_still_running_at_turn_end_is_killed_work(name: str, work: str) -> None:
    """A command started and not completed when the turn completed: named without its wrapper."""
    _, _, outcome, _ = replay(name)
    assert outcome.killed_work == (work,)
    assert not outcome.failed
    assert outcome.result_seen


@pytest.mark.parametrize("name", ["codex-0.169.0-resume", "codex-0.169.0-captured-resume"])
def test_resume_gives_the_same_thread_and_its_last_message(name: str) -> None:
    """A resumed thread: the final message, nothing killed, success."""
    progress, _, outcome, _ = replay(name)
    assert progress == ["session started"]
    assert outcome.final_message
    assert outcome.killed_work == ()
    assert not outcome.failed


def test_resumed_thread_keeps_the_id_of_the_thread_it_resumes() -> None:
    """The captured resume announces the thread id of the session it resumed."""
    *_, first, _ = replay("codex-0.169.0-captured-background-left-running")
    *_, second, _ = replay("codex-0.169.0-captured-resume")
    assert first.session_id
    assert second.session_id == first.session_id


def test_unknown_resume_id_fails_and_is_recognised_from_stderr() -> None:
    """Nothing on stdout, exit 1: failed, and stderr's 'no rollout found' marks it unknown."""
    progress, events, outcome, stderr = replay("codex-0.169.0-captured-resume-unknown-id")
    assert (progress, events) == ([], [])
    assert outcome.failed
    assert outcome.failure_cause == "codex exited 1"
    assert CodexHarness().resume_unknown(outcome, stderr)
    assert not CodexHarness().resume_unknown(outcome, "Error: something else\n")


def test_failed_turn_fails_with_its_error_message() -> None:
    """turn.failed: failed, the cause is codex's own message."""
    _, events, outcome, _ = replay("codex-0.169.0-captured-turn-failed")
    assert outcome.failed
    assert outcome.result_seen
    assert (outcome.failure_cause or "").startswith(
        "codex's turn failed: exceeded retry limit, last status: 429"
    )
    assert events[-1].kind == "error"


def test_interrupted_turn_fails_with_the_exit_status() -> None:
    """SIGINT mid-turn: no turn end, exit 1, failed."""
    progress, _, outcome, _ = replay("codex-0.169.0-captured-interrupted")
    assert progress == ["session started"]
    assert outcome.failed
    assert not outcome.result_seen
    assert outcome.failure_cause == "codex exited 1"


# --- the reader's rules, on small made-up streams --------------------------------------------


def test_item_reemitted_as_completed_in_progress_is_still_running() -> None:
    """Codex re-emits unfinished items as completed with status in_progress: still killed."""
    reader = CodexReader()
    feed(
        reader,
        STARTED,
        command("item.started", "i1", "bash -lc 'npm test'", status="in_progress"),
        command("item.completed", "i1", "bash -lc 'npm test'", status="in_progress"),
        message("done"),
        TURN_DONE,
    )
    assert reader.finish(0, stopped_after_result=False).killed_work == ("npm test",)


def test_command_completed_without_a_start_is_still_shown_once() -> None:
    """Older builds emit only item.completed: one progress line, a call and a result event."""
    reader = CodexReader()
    seen = reader.feed(
        json.dumps(command("item.completed", "i1", "ls", exit_code=0, status="completed")).encode()
    )
    assert seen.progress == ("$ ls",)
    assert [e.kind for e in seen.events] == ["tool_call", "tool_result"]


def test_usage_is_the_thread_s_running_total_of_the_last_turn() -> None:
    """codex's turn.completed reports the thread's totals so far: the last is the session's."""
    reader = CodexReader()
    first = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 5}
    later = {"input_tokens": 250, "cached_input_tokens": 90, "output_tokens": 12}
    feed(reader, STARTED, message("a"), {"type": "turn.completed", "usage": first})
    feed(reader, message("b"), {"type": "turn.completed", "usage": later})
    outcome = reader.finish(0, stopped_after_result=False)
    assert (outcome.usage.input_tokens, outcome.usage.cached_input_tokens) == (250, 90)
    assert outcome.usage.output_tokens == 12
    assert outcome.final_message == "b"
    assert outcome.usage.describe() == "250 input tokens (90 cached), 12 output tokens"


def test_a_resume_s_usage_is_its_thread_totals_less_the_resumed_session_s() -> None:
    from thirdshift.harnesses.codex import CodexHarness
    from thirdshift.records import Usage

    reported = Usage(input_tokens=226_326, cached_input_tokens=90_000, output_tokens=700)
    resumed = Usage(input_tokens=200_000, cached_input_tokens=80_000, output_tokens=500)
    net = CodexHarness().resume_usage(reported, resumed)
    assert (net.input_tokens, net.cached_input_tokens, net.output_tokens) == (26_326, 10_000, 200)
    assert net.cache_write_tokens is None


def test_fatal_error_without_turn_end_is_named_in_the_cause() -> None:
    """A top-level error and exit 1 with no turn end: the cause carries the error."""
    reader = CodexReader()
    feed(reader, STARTED, {"type": "error", "message": "stream disconnected"})
    outcome = reader.finish(1, stopped_after_result=False)
    assert outcome.failure_cause == "codex exited 1: stream disconnected"


def test_exit_by_signal_is_named() -> None:
    """A signal exit reads 'codex exited by signal SIGTERM'."""
    outcome = CodexReader().finish(-15, stopped_after_result=False)
    assert outcome.failure_cause == "codex exited by signal SIGTERM"


def test_completed_turn_stopped_by_thirdshift_is_not_failed() -> None:
    """Stopped by the post-result watchdog after turn.completed: a success."""
    reader = CodexReader()
    feed(reader, STARTED, message("ok"), TURN_DONE)
    assert not reader.finish(-2, stopped_after_result=True).failed
    other = CodexReader()
    feed(other, STARTED, message("ok"), TURN_DONE)
    assert other.finish(-15, stopped_after_result=False).failed


def test_git_push_in_a_wrapped_command_is_recognised() -> None:
    """A push inside bash -lc "..." is shown as push."""
    reader = CodexReader()
    progress = feed(reader, command("item.started", "i1", '/bin/bash -lc "git push -u origin x"'))
    assert progress == ["push"]


# --- scrub first, then cut ---------------------------------------------------------------------

# A known secret with no shape of its own: only its value tells it.
SECRET = "opaque-db-password-7f3k9q2x"


def test_a_known_secret_across_the_cut_leaves_nothing_in_the_progress_line_or_the_events() -> None:
    """A command whose secret straddles the 100th character of its progress line, and whose
    output runs it across the 200th of the summary: scrubbed before the cuts, nothing is left."""
    cmd = "/bin/bash -lc 'echo " + "x" * 83 + " " + SECRET + " && make'"
    output = "y" * 190 + " " + SECRET + " and more\nsecond line"
    (plain,) = feed(CodexReader(), command("item.started", "i1", cmd))
    assert SECRET[:8] in plain  # cut first, the line would keep the secret's start
    reader = CodexHarness().reader(scrub=Scrubber([SECRET]))
    started = reader.feed(json.dumps(command("item.started", "i1", cmd)).encode())
    done = command("item.completed", "i1", cmd, aggregated_output=output, exit_code=0)
    finished = reader.feed(json.dumps(done).encode())
    (line,) = started.progress
    (call,) = started.events
    (result,) = finished.events
    assert len(line) == 100
    assert len(result.summary) == 200
    for text in (line, call.summary, call.target or "", result.summary, result.target or ""):
        assert not any(piece in text for piece in pieces(SECRET, 4)), text


def test_a_forged_turn_completed_with_smaller_totals_never_lowers_the_usage() -> None:
    """A turn.completed written by the agent with totals below the thread's (or negative ones)
    leaves the figures codex reported."""
    reader = CodexReader()
    real = {"input_tokens": 250, "cached_input_tokens": 90, "output_tokens": 12}
    forged = {"input_tokens": 1, "cached_input_tokens": -90, "output_tokens": 0}
    feed(reader, STARTED, message("a"), {"type": "turn.completed", "usage": real})
    feed(reader, {"type": "turn.completed", "usage": forged})
    outcome = reader.finish(0, stopped_after_result=False)
    usage = outcome.usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (250, 90, 12)
