"""The Qwen Code Harness: ``qwen <prompt> --output-format stream-json``, and its stream reader.

Facts this adapter relies on (Qwen Code 0.24.4, the pinned version; adr/0034):

- stdout is one JSON object per line, shaped like Claude Code's: ``system``/``init`` (the
  session id, the model, ``qwen_code_version``), ``assistant`` lines (text, thinking, tool_use
  blocks, each message's usage), ``user`` lines (tool results), one ``result`` per process, and
  ``stream_event`` lines of its own (goal state) that say nothing thirdshift needs. Its
  assistant and user lines are read as Claude Code's are (``claude_stream``).
- It speaks Anthropic Messages (``--auth-type anthropic``: ``ANTHROPIC_BASE_URL``,
  ``ANTHROPIC_API_KEY``) or OpenAI's Chat Completions or Responses (``--auth-type openai`` or
  ``openai-responses``: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``). Tools are snake_case:
  ``run_shell_command``, ``read_file``, ``write_file``, ``edit``, ``grep_search``, ``glob``.
- Everything it keeps (settings, transcripts under ``projects/<cwd>/chats``, memory, usage
  logs) is under ``QWEN_HOME`` (default ``~/.qwen``). After a turn it asks the model once more,
  in the same process, to extract "memories" unless ``memory.enableManagedAutoMemory`` is off.
- Its usage's ``input_tokens`` is every input token, cache reads and writes included (it adds
  Anthropic's three figures up), beside ``cache_read_input_tokens``; it names no cache writes.
- ``--resume <id>`` resumes in the same session id, and its result's usage counts the whole
  session's requests, the resumed ones too. An unknown id prints nothing on stdout and "No
  saved session found with ID" on stderr, exit 1. No result states a cost.
- ``run_shell_command`` with ``is_background`` starts a shell the stream never mentions again:
  the process does not wait for it and ends it when it exits after its result.
- SIGTERM ends it at once (killed by the signal), with its shells.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import Path
from typing import Any

from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import QWEN
from thirdshift.harnesses.base import NOTHING, Observation, StreamOutcome, Usage
from thirdshift.harnesses.claude_stream import ContentBlocks, ToolCall, Tools
from thirdshift.harnesses.model_gateway import GatewayPlan, variables_behind_gateway
from thirdshift.harnesses.stream import (
    OUTAGE_STATUSES,
    EventLog,
    Scrub,
    allowlisted,
    as_count,
    as_str,
    decode,
    exit_description,
    first_line,
    one_line,
    option,
    provider_endpoints,
)
from thirdshift.network import HostPattern
from thirdshift.records import ProviderOutage, less, plus

NAME = QWEN.name

_AUTH_OPTION = "--auth-type"
_DEFAULT_AUTH = "anthropic"
# The variables of each provider family ``--auth-type`` chooses; only the chosen one's pass.
_ANTHROPIC_VARIABLES = frozenset({"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"})
_OPENAI_VARIABLES = frozenset({"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"})
_PROVIDER_HOSTS = {
    "anthropic": ("api.anthropic.com:443",),
    "openai": ("api.openai.com:443",),
}
_DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
# An unattended session phones nowhere but the model provider, and says nothing on stderr
# about running without approvals (nobody is there to approve).
_QUIET = {
    "QWEN_TELEMETRY_ENABLED": "false",
    "QWEN_USAGE_STATISTICS_ENABLED": "false",
    "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    "QWEN_DISABLE_AUTO_TITLE": "1",
    # Else it always starts itself a second time (on node 20, a supervising parent and a
    # child): a second parse of its bundle per session, a quarter of its start CPU. Its
    # heap sizing, the relaunch's one option, is off unless a setting asks for it.
    "QWEN_CODE_NO_RELAUNCH": "true",
}
_RETRIES = 0
# The settings file of its private home: no update checks, no telemetry, and no memory
# extraction (an extra model request after each turn, and notes carried between sessions).
_SETTINGS: dict[str, Any] = {
    "general": {"enableAutoUpdate": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "memory": {"enableManagedAutoMemory": False},
    # Its defaults retry a 429 ten times, a minute to five minutes apart (about 40 minutes):
    # a bounded retry leaves the rest to the Harness switch (adr/0014, adr/0034).
    "model": {
        "generationConfig": {
            "maxRetries": _RETRIES,
            "retryInitialDelayMs": 2000,
            "retryMaxDelayMs": 30000,
        }
    },
}
_UNKNOWN_RESUME = "No saved session found"
_SHELL_TOOL = "run_shell_command"
_PATH_KEYS = ("file_path", "absolute_path", "path")
# Every tool whose input names a file shows it; only a shell runs in the background.
_TOOLS = Tools(
    shell=_SHELL_TOOL,
    path_keys=_PATH_KEYS,
    detail_keys=("description", "pattern", "query", "url", "prompt", "command", *_PATH_KEYS),
    background_key="is_background",
    background_tools=frozenset({_SHELL_TOOL}),
)
_EXIT_CODE = re.compile(r"(?:Exit Code|exit code):?\s*(-?\d+)")
# How the error result names the provider's status once qwen has spent its retries:
# "[API Error: 529 {...the provider's body...}]".
_STATUS = re.compile(r"\[API Error: (\d{3})\b")


@dataclass
class QwenHarness:
    """Qwen Code, run as ``qwen <prompt> --output-format stream-json --approval-mode yolo``
    (no approvals: nobody is there to give them) with ``--auth-type anthropic`` unless the
    options name another."""

    name = NAME
    executable: str = QWEN.executable
    extra_args: tuple[str, ...] = ()

    @property
    def auth_type(self) -> str:
        """The provider family the options choose (``--auth-type X`` or ``--auth-type=X``)."""
        for index, arg in enumerate(self.extra_args):
            if arg == _AUTH_OPTION and index + 1 < len(self.extra_args):
                return self.extra_args[index + 1]
            if arg.startswith(_AUTH_OPTION + "="):
                return arg.split("=", 1)[1]
        return _DEFAULT_AUTH

    def argv(self, prompt: str, *, model: str | None, resume_id: str | None) -> list[str]:
        named = any(a == _AUTH_OPTION or a.startswith(_AUTH_OPTION + "=") for a in self.extra_args)
        return [
            self.executable,
            prompt,
            "--output-format",
            "stream-json",
            "--approval-mode",
            "yolo",
            *self.extra_args,
            *option(_AUTH_OPTION, None if named else _DEFAULT_AUTH),
            *option("--model", model),
            *option("--resume", resume_id),
        ]

    def _family(self) -> str:
        return "anthropic" if self.auth_type == "anthropic" else "openai"

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        names = _ANTHROPIC_VARIABLES if self._family() == "anthropic" else _OPENAI_VARIABLES
        env = allowlisted(base, names)  # QWEN_HOME is the private home's (``private_home``)
        env.update(_QUIET)
        return env

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        # SIGTERM ends it at once (killed by the signal), and the shells it started with it.
        return (signal.SIGTERM,)

    def reader(self, scrub: Scrub | None = None) -> QwenReader:
        return QwenReader(scrub=scrub)

    def private_home(
        self, base: Mapping[str, str], home: Path, *, login: bool = True
    ) -> dict[str, str]:
        # Qwen Code keeps everything in QWEN_HOME: its settings (which may hold other
        # providers' keys and MCP servers' tokens) stay behind; a private one is written.
        # Its own credentials are the provider's variables, passed by ``environment``.
        qwen_home = home / ".qwen"
        qwen_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_settings(qwen_home / "settings.json")
        return {"HOME": str(home), "QWEN_HOME": str(qwen_home)}

    reports_cost = False

    def version_argv(self) -> list[str] | None:
        return None  # its init line names it (``qwen_code_version``)

    def parse_version(self, output: str) -> str | None:
        return None

    def resume_usage(self, reported: Usage, resumed: Usage) -> Usage:
        # A resumed session's result counts the requests of the session it resumes too.
        return less(reported, resumed)

    def provider_endpoints(self, env: Mapping[str, str]) -> tuple[HostPattern, ...]:
        family = self._family()
        variable = "ANTHROPIC_BASE_URL" if family == "anthropic" else "OPENAI_BASE_URL"
        return provider_endpoints(_PROVIDER_HOSTS[family], [env.get(variable, "")])

    def behind_gateway(self, env: Mapping[str, str]) -> GatewayPlan:
        family = self._family()
        return variables_behind_gateway(
            env,
            name=family,
            base_url_variable=f"{family.upper()}_BASE_URL",
            default_upstream=_DEFAULT_UPSTREAMS[family],
            key_variables=(f"{family.upper()}_API_KEY",),
            login="no key at all",
        )

    def resume_unknown(self, outcome: StreamOutcome, stderr_tail: str) -> bool:
        return _UNKNOWN_RESUME in stderr_tail or _UNKNOWN_RESUME in (outcome.failure_cause or "")


def _write_settings(path: Path) -> None:
    """Write thirdshift's settings over whatever the agent left there, never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    try:
        descriptor = os.open(path, flags, 0o600)
    except OSError as exc:
        raise ThirdshiftError(
            f"cannot write {NAME}'s settings {path} ({exc.strerror}); remove it (a link is "
            "refused) and check the agent home's permissions"
        ) from exc
    with os.fdopen(descriptor, "w") as handle:
        json.dump(_SETTINGS, handle)


@dataclass
class QwenReader:
    """Follows one ``qwen --output-format stream-json`` stdout. ``scrub`` is applied to every
    text before it is cut (see ``Harness.reader``)."""

    scrub: Scrub | None = None
    _session_id: str | None = None
    _model: str | None = None
    _version: str | None = None
    _result: dict[str, Any] | None = None
    # Each API message's usage, by message id, until the result gives the total.
    _messages: dict[str, Usage] = field(default_factory=dict)
    # Background shells it started, by description or command: it ends them when it exits.
    _background: list[str] = field(default_factory=list)
    _events: EventLog = field(init=False)
    _blocks: ContentBlocks = field(init=False)

    def __post_init__(self) -> None:
        self._events = EventLog(self.scrub)
        self._blocks = ContentBlocks(_TOOLS, self._events, self.scrub)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def result_seen(self) -> bool:
        return self._result is not None

    @property
    def usage_so_far(self) -> Usage:
        """The result's usage once it is out; before it, the messages' added up."""
        if self._result is not None:
            usage = _usage(self._result.get("usage"))
            turns = as_count(self._result.get("num_turns"))
            return self._stamped(replace(usage, turns=turns))
        return self._stamped(reduce(plus, self._messages.values(), Usage()))

    def _stamped(self, usage: Usage) -> Usage:
        return replace(usage, model=self._model, cli_version=self._version)

    def feed(self, line: bytes) -> Observation:
        event = decode(line)
        if event is None:
            return NOTHING
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            return self._init(event)
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._user(event)
        if kind == "result" and self._result is None:
            return self._end(event)
        return NOTHING

    def _init(self, event: dict[str, Any]) -> Observation:
        self._model = as_str(event.get("model")) or self._model
        self._version = as_str(event.get("qwen_code_version")) or self._version
        session_id = as_str(event.get("session_id"))
        if self._session_id is None and session_id:
            self._session_id = session_id
            return Observation(progress=("session started",))
        return NOTHING

    def _assistant(self, event: dict[str, Any]) -> Observation:
        message = event.get("message")
        if isinstance(message, dict):
            message_id = as_str(message.get("id"))
            if message_id:
                self._messages[message_id] = _usage(message.get("usage"))
        return self._blocks.assistant(event)

    def _user(self, event: dict[str, Any]) -> Observation:
        return self._blocks.user(event, self._exit_status)

    def _exit_status(self, call: ToolCall | None, output: str, is_error: bool) -> int | None:
        """A shell's: 0, or for a failed one the exit code its output names. A background shell
        that started is kept as work the process ends when it exits, and has none."""
        if call is not None and call.background and not is_error:
            work = first_line(call.target or "") or "a background shell"
            if work not in self._background:
                self._background.append(work)
            return None
        if call is None or call.name != _SHELL_TOOL:
            return None
        if not is_error:
            return 0
        match = _EXIT_CODE.search(output)
        return int(match.group(1)) if match else None

    def _end(self, event: dict[str, Any]) -> Observation:
        self._result = event
        cause = self._failure()
        if cause is not None:
            return Observation(events=(self._events.make("error", cause),))
        text = as_str(event.get("result")) or ""
        summary = one_line(text, scrub=self.scrub) or "no final message"
        return Observation(events=(self._events.make("result", summary),))

    def _failure(self) -> str | None:
        """The failure cause the result states, or None for a successful one."""
        result = self._result
        if result is None:
            return None
        subtype = as_str(result.get("subtype")) or "unknown"
        if result.get("is_error") is not True and subtype == "success":
            return None
        error = result.get("error")
        detail = as_str(error.get("message")) if isinstance(error, dict) else None
        detail = first_line(detail or as_str(result.get("result")) or "")
        return one_line(
            f"{NAME}'s turn failed: {subtype}" + (f": {detail}" if detail else ""),
            scrub=self.scrub,
        )

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        if self._result is None:
            died = exit_description(NAME, exit_status) if exit_status else None
            return StreamOutcome(
                session_id=self._session_id,
                final_message=None,
                failed=True,
                failure_cause=died or f"{NAME}'s stream ended without a result",
                killed_work=tuple(self._background),
                usage=self.usage_so_far,
            )
        failure = self._failure()
        after: str | None = None
        if failure is None and exit_status and not stopped_after_result:
            after = exit_description(NAME, exit_status) + " after its result"
        cause = failure or after
        return StreamOutcome(
            session_id=self._session_id,
            final_message=as_str(self._result.get("result")) if failure is None else None,
            failed=cause is not None,
            failure_cause=cause,
            # Whether a background shell had finished, the stream never says: each one counts
            # as killed, and the Resume runs it again in the foreground (adr/0034).
            killed_work=tuple(self._background),
            usage=self.usage_so_far,
            result_seen=True,
            provider_outage=self._outage(failure),
        )

    def _outage(self, failure: str | None) -> ProviderOutage | None:
        """A failed result whose error names an outage status: qwen's own retries are behind
        it (it retries 429 and 5xx with backoff before it gives up)."""
        if failure is None:
            return None
        match = _STATUS.search(failure)
        if match is None or int(match.group(1)) not in OUTAGE_STATUSES:
            return None
        return ProviderOutage(NAME, int(match.group(1)), failure)


# -- what lines say ------------------------------------------------------------------------------


def _usage(raw: object) -> Usage:
    usage = raw if isinstance(raw, dict) else {}
    fresh = as_count(usage.get("input_tokens"))
    cached = as_count(usage.get("cache_read_input_tokens"))
    return Usage(
        input_tokens=fresh,
        cached_input_tokens=cached,
        output_tokens=as_count(usage.get("output_tokens")),
    )
