"""The Claude Code Harness adapter: argv, environment, stop signals, and its stream reader on
real transcripts (the shared samples and captures from the pinned CLI)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.secret_corpus import pieces
from thirdshift.harnesses import StreamOutcome, harness_named
from thirdshift.harnesses.claude import ClaudeHarness, ClaudeReader
from thirdshift.records import SessionEvent
from thirdshift.scrub import Scrubber

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
PROMPT = "Fix issue 7.\nThen commit."


@pytest.fixture
def claude() -> ClaudeHarness:
    return ClaudeHarness(executable="/opt/bin/claude")


def replay(name: str) -> tuple[list[str], list[SessionEvent], StreamOutcome, str]:
    """Feed a fixture to a fresh reader: its progress lines, events, outcome, stderr tail."""
    meta = json.loads((FIXTURES / f"{name}.meta.json").read_text())
    reader = ClaudeHarness().reader()
    progress: list[str] = []
    events: list[SessionEvent] = []
    for line in (FIXTURES / f"{name}.jsonl").read_bytes().splitlines():
        seen = reader.feed(line)
        progress += seen.progress
        events += seen.events
    outcome = reader.finish(meta["exit_status"], meta["stopped_after_result"])
    return progress, events, outcome, meta["stderr_tail"]


def feed(reader: ClaudeReader, *events: dict[str, Any]) -> list[str]:
    progress: list[str] = []
    for event in events:
        progress += reader.feed(json.dumps(event).encode()).progress
    return progress


def init(session_id: str = "s-1") -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "session_id": session_id}


def tool_use(name: str, tool_input: dict[str, Any], call_id: str = "t1") -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
    return {"type": "assistant", "message": {"content": [block]}}


def tool_result(call_id: str, content: Any, is_error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return {"type": "user", "message": {"content": [block | {"is_error": is_error}]}}


def result(text: str | None = "Done.", **fields: Any) -> dict[str, Any]:
    event = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2}
    if text is not None:
        event["result"] = text
    return event | fields


def task(subtype: str, task_id: str = "b1", **fields: Any) -> dict[str, Any]:
    return {"type": "system", "subtype": subtype, "task_id": task_id} | fields


# --- argv, environment, signals -----------------------------------------------------------


def test_fresh_argv_runs_print_mode_with_stream_json_and_no_permission_prompts(
    claude: ClaudeHarness,
) -> None:
    """A fresh session is -p with the prompt as one element, stream-json, verbose, no prompts."""
    assert claude.argv(PROMPT, model=None, resume_id=None) == [
        "/opt/bin/claude",
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]


def test_model_and_resume_id_come_last_and_extra_args_first() -> None:
    """--model and --resume follow the fixed flags; extra args follow the executable."""
    claude = ClaudeHarness(executable="claude", extra_args=("--plugin-dir", "p"))
    assert claude.argv("go", model="opus", resume_id="abc") == [
        "claude",
        "--plugin-dir",
        "p",
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        "--model",
        "opus",
        "--resume",
        "abc",
    ]


def test_environment_keeps_only_the_allowlist_and_the_provider_variables(
    claude: ClaudeHarness,
) -> None:
    """GitHub tokens, THIRDSHIFT_* and foreign credentials never reach the CLI; provider vars do."""
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/agent",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "GIT_AUTHOR_NAME": "Agent",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "CLAUDE_CONFIG_DIR": "/home/agent/.claude",
        "CLAUDE_CODE_USE_BEDROCK": "0",
        "GITHUB_TOKEN": "ghp_secret",
        "GH_TOKEN": "gho_secret",
        "THIRDSHIFT_GITHUB_TOKEN": "ghp_other",
        "THIRDSHIFT_HOME": "/var/lib/thirdshift",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "OPENAI_API_KEY": "sk-openai",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
    }
    env = claude.environment(base)
    for kept in (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "GIT_AUTHOR_NAME",
        "GIT_CONFIG_GLOBAL",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_USE_BEDROCK",
    ):
        assert env[kept] == base[kept]
    for dropped in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "THIRDSHIFT_GITHUB_TOKEN",
        "THIRDSHIFT_HOME",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "SSH_AUTH_SOCK",
    ):
        assert dropped not in env
    assert "ghp_" not in json.dumps(env)


def test_environment_turns_off_telemetry_updates_and_error_reports(claude: ClaudeHarness) -> None:
    """An unattended session phones nowhere but the model provider."""
    env = claude.environment({"DISABLE_TELEMETRY": "0"})
    assert env["DISABLE_TELEMETRY"] == "1"
    assert env["DISABLE_AUTOUPDATER"] == "1"
    assert env["DISABLE_ERROR_REPORTING"] == "1"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_environment_declares_a_sandbox_exactly_when_running_as_root(
    claude: ClaudeHarness,
) -> None:
    """IS_SANDBOX=1 lets --dangerously-skip-permissions run under uid 0, and only there."""
    env = claude.environment({})
    if os.geteuid() == 0:
        assert env["IS_SANDBOX"] == "1"
    else:
        assert "IS_SANDBOX" not in env


def test_stop_signal_is_sigterm(claude: ClaudeHarness) -> None:
    """SIGTERM makes Claude Code report its running tasks as killed before it exits."""
    assert list(claude.stop_signals) == [signal.SIGTERM]


def test_harness_named_builds_the_claude_adapter() -> None:
    """The registry hands out this adapter by name, with the executable override."""
    harness = harness_named("claude", executable="/x/claude", extra_args=["--a"])
    assert isinstance(harness, ClaudeHarness)
    assert harness.argv("p", model=None, resume_id=None)[:2] == ["/x/claude", "--a"]


# --- the reader on real transcripts ----------------------------------------------------------


def test_tool_session_sample_gives_id_progress_events_and_final_message() -> None:
    """The shared tool session: one Bash call, its output, the final message, usage."""
    progress, events, outcome, _ = replay("claude-2.1.328-tool-session")
    assert progress == ["session started", "$ echo hello > hello.txt && cat hello.txt"]
    assert [(e.seq, e.kind, e.tool, e.exit_status, e.summary) for e in events] == [
        (1, "tool_call", "Bash", None, "$ echo hello > hello.txt && cat hello.txt"),
        (2, "tool_result", "Bash", 0, "hello"),
        (3, "message", None, None, "Done: wrote hello.txt"),
        (4, "result", None, None, "Done: wrote hello.txt"),
    ]
    assert events[0].target == "echo hello > hello.txt && cat hello.txt"
    assert outcome.session_id == "25c03292-1c61-4edb-98c3-868642a6004e"
    assert outcome.final_message == "Done: wrote hello.txt"
    assert not outcome.failed
    assert outcome.killed_work == ()
    assert outcome.result_seen
    assert outcome.usage.turns == 2
    assert outcome.usage.cost_usd == pytest.approx(0.00028)
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (20, 10)
    assert (outcome.usage.model, outcome.usage.cli_version) == ("claude-opus-5-5", "2.1.328")
    assert outcome.usage.cost_source == "reported"


def test_usage_so_far_counts_each_api_message_once_until_the_result_gives_the_cost() -> None:
    """Claude repeats an API message once per content block, with the same usage: a running
    session's tokens count each message once; the result's figures (with claude's cost, cache
    reads and writes) then replace them."""
    reader = ClaudeReader()

    def message(message_id: str, tokens_in: int, block: dict[str, Any]) -> dict[str, Any]:
        usage = {"input_tokens": tokens_in, "output_tokens": 5}
        return {"type": "assistant", "message": {"id": message_id, "usage": usage} | block}

    text = {"content": [{"type": "text", "text": "Looking."}]}
    call = {"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
    feed(reader, init(), message("m1", 100, text), message("m1", 100, call))
    feed(reader, message("m2", 300, text))
    running = reader.usage_so_far
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 700,
        "output_tokens": 30,
    }
    feed(reader, result(total_cost_usd=0.42, usage=usage))

    assert (running.input_tokens, running.output_tokens, running.cost_usd) == (400, 10, None)
    final = reader.usage_so_far
    assert (final.input_tokens, final.cached_input_tokens, final.cache_write_tokens) == (
        910,
        700,
        200,
    )
    assert (final.cost_usd, final.cost_source) == (0.42, "reported")
    assert reader.finish(0, stopped_after_result=False).usage == final


def test_the_model_is_the_init_line_s_and_never_claude_s_synthetic_marker() -> None:
    """Claude's own error messages carry the model "<synthetic>": the ledger keeps the model the
    session was started with."""
    reader = ClaudeReader()
    synthetic = {"id": "m9", "model": "<synthetic>", "content": [{"type": "text", "text": "x"}]}
    feed(reader, init() | {"model": "claude-sonnet-4-5"})
    feed(reader, {"type": "assistant", "message": synthetic})
    assert reader.usage_so_far.model == "claude-sonnet-4-5"
    without_init = ClaudeReader()
    feed(without_init, {"type": "assistant", "message": synthetic})
    feed(without_init, {"type": "assistant", "message": synthetic | {"model": "claude-x"}})
    assert without_init.usage_so_far.model == "claude-x"
    # the result's own account wins: the model that answered most, by cost
    billed = {
        "claude-haiku-4-5": {"costUSD": 0.01},
        "claude-opus-5-5": {"costUSD": 0.9},
        "<synthetic>": {"costUSD": 5},
    }
    feed(reader, result(total_cost_usd=0.91, modelUsage=billed))
    assert reader.finish(0, stopped_after_result=False).usage.model == "claude-opus-5-5"


def test_captured_tool_session_condenses_every_kind_of_call() -> None:
    """Read/Edit/Write name their path, a failing command keeps its exit status, a commit is
    recognised, an unknown tool shows its detail."""
    progress, events, outcome, _ = replay("claude-2.1.328-captured-tools")
    repo = "/home/dev/claude-2.1.328-captured-tools"
    assert progress == [
        "session started",
        f"Read {repo}/README.md",
        f"Edit {repo}/README.md",
        f"Write {repo}/NOTES.md",
        "$ ls no-such-file",
        "Grep captured",
        "commit",
    ]
    failing = next(e for e in events if e.kind == "tool_result" and e.target == "ls no-such-file")
    assert failing.exit_status == 2
    assert failing.summary == "failed: Exit code 2"
    commit = [e for e in events if e.tool == "Bash" and e.target and "commit" in e.target]
    assert [(e.kind, e.exit_status) for e in commit] == [("tool_call", None), ("tool_result", 0)]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(len(e.summary) <= 200 and "\n" not in e.summary for e in events)
    assert outcome.final_message == "Committed the README change.\nAll done."
    assert not outcome.failed
    assert outcome.usage.turns == 7


@pytest.mark.parametrize(
    "name",
    ["claude-2.1.328-background-killed-on-sigterm", "claude-2.1.328-captured-background-killed"],
)
def test_background_task_killed_after_the_result_is_named_by_its_description(name: str) -> None:
    """Stopped after its result, the session is not failed and names the killed task."""
    progress, _, outcome, _ = replay(name)
    assert progress[0] == "session started"
    assert progress[1].startswith("$ sleep ")
    assert outcome.killed_work == ("long tests",)
    assert not outcome.failed
    assert outcome.result_seen
    assert outcome.final_message


def test_a_kill_signal_after_the_result_fails_the_session_when_thirdshift_did_not_stop_it() -> None:
    """Someone else's SIGTERM after the result is an unexplained exit: a failure, work named."""
    reader = ClaudeReader()
    path = FIXTURES / "claude-2.1.328-background-killed-on-sigterm.jsonl"
    for line in path.read_bytes().splitlines():
        reader.feed(line)
    outcome = reader.finish(-15, stopped_after_result=False)
    assert outcome.failed
    assert outcome.failure_cause == "claude exited by signal SIGTERM after its result"
    assert outcome.killed_work == ("long tests",)


@pytest.mark.parametrize("name", ["claude-2.1.328-resume", "claude-2.1.328-captured-resume"])
def test_resume_takes_the_last_result_not_the_zero_turn_one(name: str) -> None:
    """A resume prints a zero-turn result first; the final message and usage are the last's."""
    progress, events, outcome, _ = replay(name)
    assert progress == ["session started"]
    assert [e.kind for e in events].count("result") == 2
    assert outcome.final_message
    assert outcome.usage.turns == 1
    assert outcome.killed_work == ()  # the earlier process's task was never started here
    assert not outcome.failed


def test_resumed_session_keeps_the_id_of_the_session_it_resumes() -> None:
    """The captured resume announces the same session id as the session it resumed."""
    *_, first, _ = replay("claude-2.1.328-captured-background-killed")
    *_, second, _ = replay("claude-2.1.328-captured-resume")
    assert first.session_id
    assert second.session_id == first.session_id


@pytest.mark.parametrize(
    "name", ["claude-2.1.328-resume-unknown-id", "claude-2.1.328-captured-resume-unknown-id"]
)
def test_unknown_resume_id_fails_and_is_recognised_as_unknown(name: str) -> None:
    """One error result: failed with the CLI's own words, and resume_unknown says so."""
    progress, events, outcome, stderr = replay(name)
    assert progress == []
    assert [e.kind for e in events] == ["error"]
    assert outcome.failed
    assert outcome.session_id is None
    assert outcome.failure_cause == (
        "claude's turn failed: error_during_execution: "
        "No conversation found with session ID: 00000000-0000-4000-8000-000000000000"
    )
    assert ClaudeHarness().resume_unknown(outcome, stderr)
    assert ClaudeHarness().resume_unknown(outcome, "")


def test_background_task_that_finished_opens_a_new_turn_and_the_last_result_counts() -> None:
    """A completed task wakes the CLI into a second turn: its result is final, nothing killed."""
    _, events, outcome, _ = replay("claude-2.1.328-captured-background-completed")
    assert [e.summary for e in events if e.kind == "result"] == [
        "Waiting for the build.",
        "The build finished.",
    ]
    assert outcome.final_message == "The build finished."
    assert outcome.killed_work == ()
    assert not outcome.failed


def test_session_stopped_mid_turn_fails_with_the_exit_status() -> None:
    """A SIGTERM before any result: failed, the session id known, the exit named."""
    progress, events, outcome, _ = replay("claude-2.1.328-captured-stopped-mid-turn")
    assert progress == ["session started"]
    assert events == []
    assert outcome.failed
    assert not outcome.result_seen
    assert outcome.session_id
    assert outcome.failure_cause == "claude exited 143"


# --- the reader's rules, on small made-up streams --------------------------------------------


def test_git_commit_and_push_are_recognised_in_one_command() -> None:
    """A command that commits and pushes is one progress line: commit and push."""
    reader = ClaudeReader()
    progress = feed(
        reader,
        init(),
        tool_use("Bash", {"command": "git commit -am 'x' && git push origin HEAD"}),
        tool_use("Bash", {"command": "git -C repo push"}, "t2"),
        tool_use("Bash", {"command": "git log --grep commit"}, "t3"),
    )
    assert progress == ["session started", "commit and push", "push", "$ git log --grep commit"]


def test_long_details_are_cut_at_100_characters_with_an_ellipsis() -> None:
    """A long command shows its first line only, cut to 100 characters ending in …"""
    reader = ClaudeReader()
    command = "echo " + "x" * 300 + "\necho second line"
    (line,) = feed(reader, tool_use("Bash", {"command": command}))
    assert len(line) == 100
    assert line.startswith("$ echo xxx")
    assert line.endswith("…")


def test_tool_result_summary_is_one_short_line_never_the_whole_output() -> None:
    """A big tool output becomes a summary of at most 200 characters on one line."""
    reader = ClaudeReader()
    feed(reader, tool_use("Read", {"file_path": "src/app.py"}))
    output = [{"type": "text", "text": "line " * 100 + "\n" + "more\n" * 10_000}]
    seen = reader.feed(json.dumps(tool_result("t1", output)).encode())
    (event,) = seen.events
    assert event.kind == "tool_result"
    assert (event.tool, event.target) == ("Read", "src/app.py")
    assert len(event.summary) <= 200
    assert "\n" not in event.summary


def test_session_id_comes_from_the_first_init_only() -> None:
    """A later init (a new turn) neither changes the id nor repeats 'session started'."""
    reader = ClaudeReader()
    progress = feed(reader, init("first"), result(), init("second"), result())
    assert progress == ["session started"]
    assert reader.session_id == "first"


def test_error_result_fails_with_subtype_and_errors() -> None:
    """error_max_turns with no result text: the cause names the subtype and the first error."""
    reader = ClaudeReader()
    feed(
        reader,
        init(),
        result(None, subtype="error_max_turns", is_error=True, errors=["Reached max turns (4)"]),
    )
    outcome = reader.finish(1, stopped_after_result=False)
    assert outcome.failed
    assert outcome.failure_cause == "claude's turn failed: error_max_turns: Reached max turns (4)"
    assert outcome.final_message is None
    assert outcome.result_seen


def test_success_subtype_with_is_error_is_a_failure() -> None:
    """An API error can end a turn the CLI labels success: is_error decides."""
    reader = ClaudeReader()
    feed(reader, init(), result("API Error: 500", is_error=True, api_error_status=500))
    outcome = reader.finish(1, stopped_after_result=False)
    assert outcome.failed
    assert outcome.failure_cause == "claude's turn failed: API error 500: API Error: 500"


def test_nonzero_exit_without_a_result_names_the_exit() -> None:
    """claude exiting 1 with nothing on stdout (e.g. refusing to run as root) says so."""
    reader = ClaudeReader()
    outcome = reader.finish(1, stopped_after_result=False)
    assert outcome.failed
    assert outcome.failure_cause == "claude exited 1"


def test_stream_without_a_result_and_a_clean_exit_is_a_failure() -> None:
    """Exit 0 without a result still is not a finished session."""
    reader = ClaudeReader()
    feed(reader, init(), tool_use("Bash", {"command": "make"}))
    outcome = reader.finish(0, stopped_after_result=False)
    assert outcome.failed
    assert outcome.failure_cause == "claude's stream ended without a result"
    assert outcome.session_id == "s-1"


def test_tasks_killed_before_the_last_result_are_not_killed_work() -> None:
    """Only kills reported after the LAST result count; an earlier kill was already dealt with."""
    reader = ClaudeReader()
    feed(
        reader,
        init(),
        task("task_started", "b1", description="old tests"),
        result("first"),
        task("task_updated", "b1", patch={"status": "killed"}),
        init(),
        task("task_started", "b2", description="new tests"),
        result("second"),
        task("task_notification", "b2", status="stopped"),
    )
    outcome = reader.finish(0, stopped_after_result=False)
    assert outcome.killed_work == ("new tests",)
    assert outcome.final_message == "second"


def test_tasks_never_ended_count_as_killed_only_when_thirdshift_stopped_the_session() -> None:
    """A task with no ending is killed work when the post-result watchdog stopped the CLI."""
    events = (
        init(),
        task("task_started", "b1", description="slow build"),
        task("task_started", "b2", description="quick lint"),
        task("task_notification", "b2", status="completed"),
        task("task_started", "b3", description="e2e suite"),
        result(),
    )
    stopped = ClaudeReader()
    feed(stopped, *events)
    assert stopped.finish(-15, stopped_after_result=True).killed_work == (
        "slow build",
        "e2e suite",
    )
    exited = ClaudeReader()
    feed(exited, *events)
    assert exited.finish(0, stopped_after_result=False).killed_work == ()


def test_resume_unknown_looks_at_stderr_too() -> None:
    """A 'No conversation found' on stderr alone is enough."""
    outcome = ClaudeReader().finish(1, stopped_after_result=False)
    assert ClaudeHarness().resume_unknown(outcome, "No conversation found with session ID: x\n")
    assert not ClaudeHarness().resume_unknown(outcome, "some other error\n")


# --- scrub first, then cut ---------------------------------------------------------------------

# A known secret with no shape of its own: only its value tells it.
SECRET = "opaque-db-password-7f3k9q2x"


def test_a_known_secret_across_the_cut_leaves_nothing_in_the_progress_line_or_the_call() -> None:
    """The secret straddles the 100th character of the progress line: scrubbed before the cut,
    not a character of it is left, in the line or in the tool call event."""
    command = "echo " + "x" * 83 + " " + SECRET + " && make"
    block = tool_use("Bash", {"command": command})
    (plain,) = feed(ClaudeReader(), block)
    assert SECRET[:8] in plain  # cut first, the line would keep the secret's start
    seen = ClaudeHarness().reader(scrub=Scrubber([SECRET])).feed(json.dumps(block).encode())
    (line,) = seen.progress
    (call,) = seen.events
    assert len(line) == 100
    assert line.endswith("…")
    for text in (line, call.summary, call.target or ""):
        assert not any(piece in text for piece in pieces(SECRET, 4)), text


def test_a_known_secret_across_the_cut_leaves_nothing_in_the_result_summary() -> None:
    """A tool output whose first line runs a secret across the 200th character: the event
    summary holds no piece of it."""
    output = "y" * 190 + " " + SECRET + " trailing words\nsecond line"
    events = [tool_use("Bash", {"command": "env"}), tool_result("t1", output)]
    reader = ClaudeHarness().reader(scrub=Scrubber([SECRET]))
    feed(reader, events[0])
    (event,) = reader.feed(json.dumps(events[1]).encode()).events
    assert len(event.summary) == 200
    assert not any(piece in event.summary for piece in pieces(SECRET, 4)), event.summary


def test_a_session_with_two_results_counts_both_queries_tokens_and_the_process_s_cost() -> None:
    """A background task woke claude for a second query: each result counts its own query's
    tokens and turns, while the cost is the process's running total."""
    _, _, outcome, _ = replay("claude-2.1.328-captured-background-completed")
    usage = outcome.usage
    assert (usage.input_tokens, usage.turns) == (33678 + 17301, 2 + 1)
    assert usage.cost_usd == pytest.approx(0.204796)


def test_a_resume_counts_only_its_own_cost_not_the_one_it_restored() -> None:
    """A resumed process opens with a zero-turn result carrying the earlier session's cost; the
    Resume's ledger line is what it spent itself."""
    _, _, outcome, _ = replay("claude-2.1.328-captured-resume")
    assert outcome.usage.cost_usd == pytest.approx(0.205612 - 0.135688)
    assert (outcome.usage.input_tokens, outcome.usage.turns) == (17396, 1)


def test_a_session_that_dies_before_its_result_keeps_the_tokens_its_messages_used() -> None:
    """Stopped mid-turn (a watchdog, Ctrl-C, a crash): no result, but the ledger still gets the
    tokens of the API messages it saw, so a budget sees what was spent."""
    reader = ClaudeReader()
    message = {"id": "m1", "usage": {"input_tokens": 9000, "output_tokens": 3}, "content": []}
    feed(reader, init() | {"model": "claude-opus-5-5"}, {"type": "assistant", "message": message})
    outcome = reader.finish(-15, stopped_after_result=False)
    assert outcome.failed
    assert (outcome.usage.input_tokens, outcome.usage.model) == (9000, "claude-opus-5-5")


def test_a_resume_s_replayed_zero_turn_result_is_not_its_own_result() -> None:
    """The resumed process first replays the earlier session's end as a zero-turn result: the
    post-result wait must not start from it, and a Resume that dies before its own result is
    a failure, not a success with an empty message."""
    reader = ClaudeReader()
    feed(reader, init(), result("", num_turns=0, total_cost_usd=0.13), init())
    assert not reader.result_seen
    died = reader.finish(-9, stopped_after_result=False)
    assert died.failed
    assert died.usage.cost_usd is None or died.usage.cost_usd == 0.0
    finished = ClaudeReader()
    feed(finished, init(), result("", num_turns=0, total_cost_usd=0.13), result("Resumed."))
    assert finished.result_seen


def test_a_forged_result_after_the_real_one_never_lowers_the_session_s_cost() -> None:
    """The agent can write stream lines of its own: a later result claiming a smaller running
    cost, negative tokens or a cost of NaN leaves the cost claude reported and counts no token
    below zero."""
    reader = ClaudeReader()
    usage = {"input_tokens": 100, "output_tokens": 10}
    feed(reader, init(), result(total_cost_usd=0.42, usage=usage))
    forged = {"input_tokens": -1_000_000, "output_tokens": -5}
    feed(reader, result(total_cost_usd=0.01, usage=forged, num_turns=-3))
    reader.feed(b'{"type": "result", "subtype": "success", "num_turns": -3, "total_cost_usd": NaN}')
    outcome = reader.finish(0, stopped_after_result=False)
    assert outcome.usage.cost_usd == 0.42
    assert outcome.usage.input_tokens == 100
    assert outcome.usage.output_tokens == 10
    assert outcome.usage.turns == 2
