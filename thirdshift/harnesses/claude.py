"""The Claude Code Harness: ``claude -p`` with stream-json output, and its stream reader.

Facts this adapter relies on (Claude Code 2.1.328, the pinned version):

- stdout is one JSON object per line: ``system``/``init`` opens each turn (and carries the
  session id), ``assistant`` lines carry one content block each (text, thinking, tool_use),
  ``user`` lines carry tool results, ``result`` ends a turn.
- A ``result`` does not end the process. With background work running, the CLI keeps waiting
  after its result; when that work finishes it may open a new turn itself (a new ``init``, a
  later ``result``). When the process is stopped, it reports each task still running as
  ``task_notification`` (status ``stopped``) and ``task_updated`` (``patch.status`` ``killed``)
  after the result. So the final message, usage and killed work follow the LAST result.
- A native resume prints the same session id; it may first print a zero-turn result for work
  the previous process left behind. An unknown id gives one error result and "No conversation
  found" on stderr.

About 550 lines: one module holds every fact about one Harness (as ``codex`` does), and
Claude Code's stream says more than Codex's: background tasks that outlive a result, turns the
CLI opens after it, rate-limit events, and usage repeated once per content block, each of which
the reader follows. Its content blocks, which Qwen Code's stream shares, are read by
``claude_stream``.
"""

from __future__ import annotations

import math
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any

from thirdshift.harness_registry import CLAUDE
from thirdshift.harnesses.base import NOTHING, Observation, StreamOutcome, Usage
from thirdshift.harnesses.claude_stream import ContentBlocks, ToolCall, Tools
from thirdshift.harnesses.model_gateway import GatewayPlan, variables_behind_gateway
from thirdshift.harnesses.stream import (
    OUTAGE_STATUSES,
    EventLog,
    Scrub,
    allowlisted,
    as_count,
    as_int,
    as_str,
    decode,
    exit_description,
    first_line,
    one_line,
    option,
    private_config_dir,
    provider_endpoints,
)
from thirdshift.network import HostPattern
from thirdshift.records import ProviderOutage, at_least, plus

_CONFIG_FILES = (".credentials.json",)
"""What of Claude Code's configuration a private home gets: the login alone. Settings files
and ~/.claude.json commonly hold other credentials (MCP servers' tokens, ``env`` blocks, an
``apiKeyHelper``); the agent gets none of them."""

NAME = CLAUDE.name

# The provider's and the CLI's own variables, passed through when the daemon has them.
_PROVIDER_VARIABLES = frozenset(
    {
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "CLAUDE_CONFIG_DIR",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "IS_SANDBOX",
    }
)
_PROVIDER_PREFIXES = ("CLAUDE_CODE_",)
# Where its key may be: each is sent as a header the model gateway can swap (x-api-key, or a
# bearer token).
_KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
_DEFAULT_UPSTREAM = "https://api.anthropic.com"
# The Messages API, and the console a subscription's login is refreshed at.
_PROVIDER_HOSTS = ("api.anthropic.com:443", "console.anthropic.com:443")
# An unattended session phones nowhere but the model provider.
_QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
_SHELL_TOOL = "Bash"
_PATH_KEYS = ("file_path", "notebook_path", "path")
_TOOLS = Tools(
    shell=_SHELL_TOOL,
    path_keys=_PATH_KEYS,
    # For other tools (and a file tool naming no file), the input field worth showing.
    detail_keys=(
        "description",
        "pattern",
        "query",
        "url",
        "prompt",
        "skill",
        "task_id",
        "command",
        *_PATH_KEYS,
    ),
    # Any tool's input may ask for it.
    background_key="run_in_background",
    # Only these name the file they work on in their progress line.
    file_tools=frozenset({"Edit", "MultiEdit", "Write", "Read", "NotebookEdit"}),
)
# Terminal task states (task_updated patch.status or task_notification status).
_KILLED = frozenset({"killed", "stopped"})
_ENDED = frozenset({"completed", "failed", "killed", "stopped"})
_EXIT_CODE = re.compile(r"Exit code (-?\d+)\b")


@dataclass
class ClaudeHarness:
    """Claude Code, run as ``claude -p <prompt> --output-format stream-json --verbose
    --dangerously-skip-permissions`` (no permission prompts: nobody is there to answer them)."""

    name = NAME
    executable: str = CLAUDE.executable
    extra_args: tuple[str, ...] = ()

    def argv(self, prompt: str, *, model: str | None, resume_id: str | None) -> list[str]:
        return [
            self.executable,
            *self.extra_args,
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            *option("--model", model),
            *option("--resume", resume_id),
        ]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = allowlisted(base, _PROVIDER_VARIABLES, _PROVIDER_PREFIXES)
        env.update(_QUIET)
        # Claude Code refuses --dangerously-skip-permissions under uid 0 ("cannot be used with
        # root/sudo privileges") unless told it runs in a sandbox. Containers and CI runners
        # often run as root, and a Worktree session is exactly such a disposable sandbox.
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"
        return env

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        # SIGTERM makes it report its running background tasks as stopped, then exit.
        return (signal.SIGTERM,)

    def reader(self, scrub: Scrub | None = None) -> ClaudeReader:
        return ClaudeReader(scrub=scrub)

    def private_home(
        self, base: Mapping[str, str], home: Path, *, login: bool = True
    ) -> dict[str, str]:
        # Claude Code keeps its login in ~/.claude (or CLAUDE_CONFIG_DIR); transcripts
        # (projects/), history, settings and ~/.claude.json stay behind.
        config = private_config_dir(
            base,
            home,
            variable="CLAUDE_CONFIG_DIR",
            folder=".claude",
            names=_CONFIG_FILES,
            login=login,
        )
        variables = {"HOME": str(home)}
        if base.get("CLAUDE_CONFIG_DIR"):
            variables["CLAUDE_CONFIG_DIR"] = str(config)
        return variables

    reports_cost = True

    def version_argv(self) -> list[str] | None:
        return None  # its init line names it (``claude_code_version``)

    def parse_version(self, output: str) -> str | None:
        return None

    def resume_usage(self, reported: Usage, resumed: Usage) -> Usage:
        # Each result counts its own query's tokens, and the reader takes a restored cost off.
        return reported

    def provider_endpoints(self, env: Mapping[str, str]) -> tuple[HostPattern, ...]:
        return provider_endpoints(_PROVIDER_HOSTS, [env.get("ANTHROPIC_BASE_URL", "")])

    def behind_gateway(self, env: Mapping[str, str]) -> GatewayPlan:
        return variables_behind_gateway(
            env,
            name="anthropic",
            base_url_variable="ANTHROPIC_BASE_URL",
            default_upstream=_DEFAULT_UPSTREAM,
            key_variables=_KEY_VARIABLES,
            login="its login (~/.claude/.credentials.json)",
        )

    def resume_unknown(self, outcome: StreamOutcome, stderr_tail: str) -> bool:
        marker = "No conversation found"
        return marker in (outcome.failure_cause or "") or marker in stderr_tail


@dataclass
class _Task:
    """A background task the stream announced with ``task_started``."""

    description: str
    status: str | None = None
    # How many results the stream had printed when the task reached its terminal status.
    ended_after_results: int = 0


@dataclass
class _Result:
    subtype: str
    is_error: bool
    text: str | None
    errors: tuple[str, ...]
    usage: Usage
    api_error_status: int | None = None


@dataclass
class ClaudeReader:
    """Follows one ``claude -p --output-format stream-json --verbose`` stdout. ``scrub`` is
    applied to every text before it is cut (see ``Harness.reader``)."""

    scrub: Scrub | None = None
    _session_id: str | None = None
    _results: int = 0
    _last: _Result | None = None
    _tasks: dict[str, _Task] = field(default_factory=dict)
    # A ``rate_limit_event`` whose status was ``rejected``: when the limit resets, if said.
    _rejected: bool = False
    _resets_at: datetime | None = None
    _events: EventLog = field(init=False)
    _blocks: ContentBlocks = field(init=False)
    _model: str | None = None
    _version: str | None = None
    # Each API message's usage, by message id: the stream repeats a message once per block.
    _messages: dict[str, Usage] = field(default_factory=dict)
    # Tokens and turns of all results so far (not their cost: claude's is a running total,
    # the last result's counts), and the cost a resumed process started from (a Resume's
    # first, zero-turn result may carry the earlier session's cost).
    _summed: Usage = field(default_factory=Usage)
    _restored_cost: float = 0.0
    _turn_results: int = 0

    def __post_init__(self) -> None:
        self._events = EventLog(self.scrub)
        self._blocks = ContentBlocks(_TOOLS, self._events, self.scrub)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def result_seen(self) -> bool:
        # A resumed process may first replay the earlier session's end as a successful
        # zero-turn result: that is not this turn's result, and the post-result wait (and the
        # end of the budget's watch) must not start from it.
        return self._turn_results > 0

    @property
    def usage_so_far(self) -> Usage:
        """Once there is a result: the tokens and turns of every result added up (each counts
        its own query), with the last result's cost (claude's running total for the process)
        less what a Resume restored; before it, the tokens of the API messages seen so far
        (their output tokens are what the message had said at its start), without a cost."""
        if self._last is None:
            return self._stamped(reduce(plus, self._messages.values(), Usage()))
        cost = self._last.usage.cost_usd
        if cost is not None and self._restored_cost:
            cost = max(cost - self._restored_cost, 0.0)
        return self._stamped(
            replace(
                self._summed,
                cost_usd=cost,
                cost_source=self._last.usage.cost_source,
                model=self._last.usage.model,
            )
        )

    def _stamped(self, usage: Usage) -> Usage:
        return replace(usage, model=usage.model or self._model, cli_version=self._version)

    def feed(self, line: bytes) -> Observation:
        event = decode(line)
        if event is None:
            return NOTHING
        kind = event.get("type")
        if kind == "system":
            return self._system(event)
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._user(event)
        if kind == "result":
            return self._result(event)
        if kind == "rate_limit_event":
            return self._rate_limit(event)
        return NOTHING

    # -- lines ---------------------------------------------------------------------------------

    def _system(self, event: dict[str, Any]) -> Observation:
        subtype = event.get("subtype")
        if subtype == "init":
            self._model = as_str(event.get("model")) or self._model
            self._version = as_str(event.get("claude_code_version")) or self._version
            session_id = as_str(event.get("session_id"))
            if self._session_id is None and session_id:
                self._session_id = session_id
                return Observation(progress=("session started",))
            return NOTHING
        task_id = as_str(event.get("task_id"))
        if not task_id:
            return NOTHING
        if subtype == "task_started":
            description = as_str(event.get("description")) or task_id
            self._tasks.setdefault(task_id, _Task(description=first_line(description) or task_id))
        elif subtype == "task_updated":
            patch = event.get("patch")
            if isinstance(patch, dict):
                self._task_status(task_id, as_str(patch.get("status")))
        elif subtype == "task_notification":
            self._task_status(task_id, as_str(event.get("status")))
        return NOTHING

    def _task_status(self, task_id: str, status: str | None) -> None:
        task = self._tasks.get(task_id)
        if task is None or status not in _ENDED:
            return
        # task_updated and task_notification both report one ending: the first one counts,
        # except that a kill reported beside it (after the same result) wins.
        first = task.status is None
        kill_beside = (
            status in _KILLED
            and task.status not in _KILLED
            and task.ended_after_results == self._results
        )
        if first or kill_beside:
            task.status = status
            task.ended_after_results = self._results

    def _rate_limit(self, event: dict[str, Any]) -> Observation:
        # Informational while "allowed"; "rejected" means the CLI will get no answer until the
        # reset, which it states in epoch seconds.
        info = event.get("rate_limit_info")
        if not isinstance(info, dict):
            return NOTHING
        if as_str(info.get("status")) != "rejected":
            # A later "allowed" takes a rejection back: claude went on (another limit window).
            self._rejected = False
            self._resets_at = None
            return NOTHING
        self._rejected = True
        resets = info.get("resetsAt")
        if isinstance(resets, int | float) and not isinstance(resets, bool) and resets > 0:
            try:
                self._resets_at = datetime.fromtimestamp(resets, UTC)
            except (OverflowError, OSError, ValueError):
                self._resets_at = None
        return NOTHING

    def _assistant(self, event: dict[str, Any]) -> Observation:
        message = event.get("message")
        if isinstance(message, dict):
            message_id = as_str(message.get("id"))
            if message_id:
                self._messages[message_id] = _usage({"usage": message.get("usage")})
            # The init line names the model; a message's is a fallback, and claude marks the
            # messages it makes up itself (an API error's) as "<synthetic>".
            model = as_str(message.get("model"))
            if self._model is None and model and not model.startswith("<"):
                self._model = model
        return self._blocks.assistant(event)

    def _user(self, event: dict[str, Any]) -> Observation:
        return self._blocks.user(event, _exit_status)

    def _result(self, event: dict[str, Any]) -> Observation:
        self._results += 1
        subtype = as_str(event.get("subtype")) or "unknown"
        is_error = event.get("is_error") is True
        raw_errors = event.get("errors")
        errors = tuple(
            e for e in (raw_errors if isinstance(raw_errors, list) else []) if isinstance(e, str)
        )
        result = _Result(
            subtype=subtype,
            is_error=is_error,
            text=as_str(event.get("result")),
            errors=errors,
            usage=_usage(event),
            api_error_status=as_int(event.get("api_error_status")),
        )
        replayed = not _failed(result) and result.usage.turns == 0
        if self._last is None and replayed and result.usage.cost_usd:
            self._restored_cost = result.usage.cost_usd
        if not replayed:
            self._turn_results += 1
        before = self._last.usage if self._last is not None else None
        if before is not None and before.cost_usd is not None:
            # claude's cost is a running total for the process (its tokens are each query's
            # own): a result costing less than an earlier one is not claude's, the agent can
            # write into the stream.
            cost = at_least(Usage(cost_usd=before.cost_usd), result.usage)
            result.usage = replace(result.usage, cost_usd=cost.cost_usd, cost_source="reported")
        self._last = result
        # From the first result on, turns are a figure (0 for a result that states none).
        self._summed = replace(
            plus(self._summed, result.usage),
            turns=(self._summed.turns or 0) + (result.usage.turns or 0),
        )
        if _failed(result):
            cause = _failure_cause(result, self.scrub)
            return Observation(events=(self._events.make("error", cause),))
        summary = one_line(result.text or "", scrub=self.scrub) or "no final message"
        return Observation(events=(self._events.make("result", summary),))

    # -- the end -------------------------------------------------------------------------------

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        last = self._last if self._turn_results else None  # a replayed end is not this one's
        killed = self._killed_work(stopped_after_result and last is not None)
        cause: str | None
        if last is None:
            if exit_status:
                cause = exit_description(NAME, exit_status)
            else:
                cause = f"{NAME}'s stream ended without a result"
            return StreamOutcome(
                session_id=self._session_id,
                final_message=None,
                failed=True,
                failure_cause=cause,
                killed_work=killed,
                usage=self.usage_so_far,  # what its messages had used when it died
            )
        cause = None
        outage: ProviderOutage | None = None
        if _failed(last):
            cause = _failure_cause(last, self.scrub)
            # Only an API error ends a turn for the provider's sake (claude calls that turn a
            # "success" with is_error); max turns, a too-long prompt, a bad key never do.
            status = last.api_error_status
            api_error = last.subtype == "success" and last.is_error
            if api_error and (
                status in OUTAGE_STATUSES or (self._rejected and status in (None, 429))
            ):
                outage = ProviderOutage(NAME, status, cause, self._resets_at)
        elif exit_status and not stopped_after_result:
            cause = exit_description(NAME, exit_status) + " after its result"
        return StreamOutcome(
            session_id=self._session_id,
            final_message=last.text,
            failed=cause is not None,
            failure_cause=cause,
            killed_work=killed,
            usage=self.usage_so_far,
            result_seen=True,
            provider_outage=outage,
        )

    def _killed_work(self, stopped_after_result: bool) -> tuple[str, ...]:
        killed: list[str] = []
        for task in self._tasks.values():
            reported = task.status in _KILLED and task.ended_after_results == self._results
            never_ended = task.status is None and stopped_after_result
            if (reported or never_ended) and task.description not in killed:
                killed.append(task.description)
        return tuple(killed)


# -- what lines say ------------------------------------------------------------------------------


def _exit_status(call: ToolCall | None, output: str, is_error: bool) -> int | None:
    """A foreground Bash command's: 0, or for a failed one the ``Exit code N`` Claude reports
    at the top of its output. A background one's result says only that it started."""
    if call is None or call.name != _SHELL_TOOL or call.background:
        return None
    if not is_error:
        return 0
    match = _EXIT_CODE.match(first_line(output))
    return int(match.group(1)) if match else None


def _usage(event: dict[str, Any]) -> Usage:
    usage = event.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    fresh = as_count(usage.get("input_tokens"))
    created = as_count(usage.get("cache_creation_input_tokens"))
    cached = as_count(usage.get("cache_read_input_tokens"))
    raw = event.get("total_cost_usd")
    cost = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    if cost is not None and not (math.isfinite(cost) and cost >= 0):
        cost = None  # json reads NaN and Infinity: no budget could be checked against them
    return Usage(
        model=_billed_model(event.get("modelUsage")),
        turns=as_count(event.get("num_turns")),
        input_tokens=None if fresh is None else fresh + (created or 0) + (cached or 0),
        cached_input_tokens=cached,
        cache_write_tokens=created,
        output_tokens=as_count(usage.get("output_tokens")),
        cost_usd=cost,
        cost_source=None if cost is None else "reported",
    )


def _billed_model(by_model: Any) -> str | None:
    """The model a result billed most, by cost (claude may call a smaller model for chores)."""
    if not isinstance(by_model, dict):
        return None
    costs = {
        name: cost if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0
        for name, entry in by_model.items()
        if isinstance(name, str) and not name.startswith("<")
        for cost in [entry.get("costUSD") if isinstance(entry, dict) else None]
    }
    return max(costs, key=lambda name: costs[name]) if costs else None


def _failed(result: _Result) -> bool:
    return result.is_error or result.subtype != "success"


def _failure_cause(result: _Result, scrub: Scrub | None) -> str:
    """``claude's turn failed: <subtype>: <first error>``; one line, scrubbed and cut."""
    detail = next(
        (first_line(text) for text in (*result.errors, result.text or "") if first_line(text)),
        "",
    )
    if result.subtype == "success":  # an API error ended a turn the CLI calls successful
        head = f"API error {result.api_error_status}" if result.api_error_status else "error"
    else:
        head = result.subtype
    return one_line(
        f"{NAME}'s turn failed: {head}" + (f": {detail}" if detail else ""), scrub=scrub
    )
