"""The Codex Harness: ``codex exec --json``, and its stream reader.

Facts this adapter relies on (Codex 0.169.0, the pinned version):

- One turn per process. stdout is one JSON object per line: ``thread.started`` (the thread id,
  also on a resume), ``turn.started``, ``item.started`` / ``item.updated`` / ``item.completed``
  (command executions, file changes, agent messages, reasoning, warnings), then
  ``turn.completed`` (with usage) or ``turn.failed`` (with the error). An interrupted turn
  prints neither.
- When the turn ends, codex kills the commands the agent left running in the background. The
  stream only shows this as a ``command_execution`` that started and had not completed when the
  turn ended (at most re-emitted as completed with status ``in_progress``).
- A resume repeats no setting of the original session: every flag is passed again. An unknown
  thread id prints nothing on stdout and "no rollout found" on stderr, exit 1.

About 500 lines: one module holds every fact about one Harness (as ``claude`` does), how its
providers given on the command line are pointed at the model gateway included (adr/0038).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from thirdshift.harness_registry import CODEX
from thirdshift.harnesses.base import NOTHING, Observation, StreamOutcome, Usage
from thirdshift.harnesses.model_gateway import (
    STAND_IN_KEY,
    GatewayPlan,
    ModelKeyInside,
    Route,
    route_for,
    variables_behind_gateway,
)
from thirdshift.harnesses.stream import (
    OUTAGE_STATUSES,
    EventLog,
    Scrub,
    allowlisted,
    as_count,
    as_int,
    as_str,
    command_progress,
    cut,
    decode,
    exit_description,
    first_line,
    one_line,
    option,
    private_config_dir,
    provider_endpoints,
    unwrap_shell,
)
from thirdshift.network import HostPattern
from thirdshift.records import ProviderOutage, SessionEvent, at_least, less

_CONFIG_FILES = ("auth.json",)
"""What of CODEX_HOME a private home gets: the login alone. config.toml commonly holds other
credentials (MCP servers' tokens and environments); the model provider is configured with
``harness_args`` instead."""

NAME = CODEX.name

_PROVIDER_VARIABLES = frozenset({"CODEX_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL"})
# codex exec reads no environment switch for telemetry or updates; these settings turn off its
# analytics and its update check, and go before the caller's own -c options so those may still
# override them.
_QUIET_ARGS = (
    "-c",
    "analytics.enabled=false",
    "-c",
    "check_for_update_on_startup=false",
)
# ``-c model_providers.<id>.env_key="VAR"``: a provider configured on the command line names the
# variable its key is read from; that variable is passed through.
_BASE_URL = re.compile(r"""^model_providers\.[^=]+\.base_url\s*=\s*["']?([^"'\s]+)""")
_CREDENTIAL_ARG = re.compile(r"http_headers|bearer_token|api_key\s*=|token\s*=", re.I)
_PROVIDER_ID = re.compile(r"""^model_providers\.([^.=]+)\.base_url\s*=""")
_DEFAULT_UPSTREAM = "https://api.openai.com/v1"
# The Responses API, and what a ChatGPT login works through (its backend, its token refresh).
_PROVIDER_HOSTS = ("api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443")
_ENV_KEY = re.compile(r"""^model_providers\.[^=]+\.env_key\s*=\s*["']?([A-Za-z_][A-Za-z0-9_]*)""")
# How a failed turn names the provider's HTTP status once codex has spent its retries:
# "unexpected status 503 Service Unavailable: ..." or "exceeded retry limit, last status: 429".
_FAILED_STATUS = re.compile(r"\b(?:unexpected status|last status:?)\s*(\d{3})\b")
_UNKNOWN_RESUME = ("no rollout found", "thread/resume failed")
_VERSION = re.compile(r"^codex(?:-cli)?\s+v?(\d+\.\d+[\w.+-]*)\s*$", re.M)
# What a file change's kind is shown as.
_CHANGE_VERBS = {"add": "Write", "update": "Edit", "delete": "Delete"}


@dataclass
class CodexHarness:
    """Codex, run as ``codex exec --json`` with no approvals and no sandbox of its own (the
    Worktree is the sandbox; nobody is there to approve)."""

    name = NAME
    executable: str = CODEX.executable
    extra_args: tuple[str, ...] = ()

    def argv(self, prompt: str, *, model: str | None, resume_id: str | None) -> list[str]:
        return [
            self.executable,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            *_QUIET_ARGS,
            *self.extra_args,
            *option("-m", model),
            *option("resume", resume_id),  # the subcommand, before the prompt
            prompt,
        ]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return allowlisted(base, _PROVIDER_VARIABLES, also=self._provider_key_variables())

    def _provider_key_variables(self) -> list[str]:
        found: list[str] = []
        for arg in self.extra_args:
            match = _ENV_KEY.match(arg)
            if match:
                found.append(match.group(1))
        return found

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        # SIGINT interrupts the turn cleanly (items reconciled, the rollout flushed); SIGTERM
        # is not handled by codex exec and ends it at once.
        return (signal.SIGINT, signal.SIGTERM)

    def reader(self, scrub: Scrub | None = None) -> CodexReader:
        return CodexReader(scrub=scrub)

    def private_home(
        self, base: Mapping[str, str], home: Path, *, login: bool = True
    ) -> dict[str, str]:
        # Codex keeps its login in CODEX_HOME (~/.codex); its settings, rollouts (sessions/)
        # and history stay behind, and new rollouts go to the private home, for a Resume.
        config = private_config_dir(
            base, home, variable="CODEX_HOME", folder=".codex", names=_CONFIG_FILES, login=login
        )
        config.mkdir(parents=True, exist_ok=True, mode=0o700)
        return {"HOME": str(home), "CODEX_HOME": str(config)}

    reports_cost = False

    def version_argv(self) -> list[str] | None:
        # Its stream names no version: ``codex --version`` prints ``codex-cli 0.169.0``.
        return [self.executable, "--version"]

    def parse_version(self, output: str) -> str | None:
        found = _VERSION.search(output)
        return found.group(1) if found else None

    def resume_usage(self, reported: Usage, resumed: Usage) -> Usage:
        # A resumed thread's totals include what the session it resumes used.
        return less(reported, resumed)

    def provider_endpoints(self, env: Mapping[str, str]) -> tuple[HostPattern, ...]:
        configured = [env.get("OPENAI_BASE_URL", "")]
        configured += [m.group(1) for arg in self.extra_args if (m := _BASE_URL.match(arg))]
        return provider_endpoints(_PROVIDER_HOSTS, configured)

    def behind_gateway(self, env: Mapping[str, str]) -> GatewayPlan:
        # A provider given on the command line (``-c model_providers.<id>.base_url=...``) reads
        # its key from its ``env_key`` variable; else the default provider's variables.
        # Its argv is readable inside the sandbox (/proc/<pid>/cmdline): no credential in it.
        if carried := [a for a in self.extra_args if _CREDENTIAL_ARG.search(a)]:
            raise ModelKeyInside(
                f"a Codex option carries a credential ({carried[0].split('=', 1)[0]}), which the "
                "agent could read from the CLI's arguments; give the provider's key through its "
                "env_key variable instead, or set unsafe_agent_holds_model_key = true"
            )
        providers = [m.group(1) for arg in self.extra_args if (m := _PROVIDER_ID.match(arg))]
        if not providers:
            plan = variables_behind_gateway(
                env,
                name="openai",
                base_url_variable="OPENAI_BASE_URL",
                default_upstream=_DEFAULT_UPSTREAM,
                key_variables=("OPENAI_API_KEY",),
                login="its login (auth.json in CODEX_HOME)",
            )
            # An env_key of a provider given no base URL here is no key the gateway holds.
            return replace(plan, dropped=plan.dropped | set(self._provider_key_variables()))
        routes: list[Route] = []
        variables: dict[str, str] = {}
        args: dict[str, str] = {}
        # The default provider's key is no command-line provider's: it stays out whatever.
        dropped = {"OPENAI_API_KEY"}
        for index, provider in enumerate(dict.fromkeys(providers)):
            base_arg = next(a for a in self.extra_args if _base_url_of(a, provider) is not None)
            keys = [m.group(1) for a in self.extra_args if (m := _env_key_of(a, provider))]
            dropped.update(keys)
            if not keys or not env.get(keys[0]):
                continue  # a provider that takes no key has nothing to keep outside
            route = route_for(f"p{index}", _base_url_of(base_arg, provider) or "", "", env[keys[0]])
            routes.append(route)
            args[base_arg] = f'model_providers.{provider}.base_url="{route.url}"'
            variables[keys[0]] = STAND_IN_KEY
        return GatewayPlan(
            routes=tuple(routes), env=variables, dropped=frozenset(dropped), args=args
        )

    def resume_unknown(self, outcome: StreamOutcome, stderr_tail: str) -> bool:
        text = f"{outcome.failure_cause or ''}\n{stderr_tail}"
        return any(marker in text for marker in _UNKNOWN_RESUME)


@dataclass
class _Command:
    command: str
    announced: bool = True


@dataclass
class CodexReader:
    """Follows one ``codex exec --json`` stdout. ``scrub`` is applied to every text before it is
    cut (see ``Harness.reader``)."""

    scrub: Scrub | None = None
    _session_id: str | None = None
    _turn_ended: bool = False
    _turn_failure: str | None = None
    _turn_failure_message: str | None = None
    _last_error: str | None = None
    _final_message: str | None = None
    _usage: Usage | None = None
    # Commands started and not completed, by item id, in start order.
    _running: dict[str, _Command] = field(default_factory=dict)
    _killed: list[str] = field(default_factory=list)
    _announced: set[str] = field(default_factory=set)
    _nameless: int = 0
    _events: EventLog = field(init=False)

    def __post_init__(self) -> None:
        self._events = EventLog(self.scrub)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def usage_so_far(self) -> Usage:
        """The tokens of the turns completed so far. Codex reports neither a cost nor its model
        or version; the caller prices the tokens and knows the model it asked for."""
        return self._usage or Usage()

    @property
    def result_seen(self) -> bool:
        return self._turn_ended

    def feed(self, line: bytes) -> Observation:
        event = decode(line)
        if event is None:
            return NOTHING
        kind = event.get("type")
        if kind == "thread.started":
            thread_id = as_str(event.get("thread_id"))
            if self._session_id is None and thread_id:
                self._session_id = thread_id
                return Observation(progress=("session started",))
            return NOTHING
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                return self._item(kind, item)
            return NOTHING
        if kind == "turn.completed":
            return self._turn_completed(event)
        if kind == "turn.failed":
            return self._turn_failed(event)
        if kind == "error":
            message = first_line(as_str(event.get("message")) or "") or "unknown error"
            self._last_error = message
            return Observation(events=(self._events.make("error", message),))
        return NOTHING

    # -- items ---------------------------------------------------------------------------------

    def _item(self, kind: str, item: dict[str, Any]) -> Observation:
        item_type = item.get("type")
        item_id = as_str(item.get("id")) or ""
        done = kind == "item.completed"
        if item_type == "command_execution":
            return self._command(item_id, item, done)
        if item_type == "file_change":
            return self._file_change(item_id, item)
        if item_type == "mcp_tool_call":
            return self._mcp_call(item_id, item, done)
        if item_type == "web_search":
            return self._announce(item_id, "web_search", as_str(item.get("query")) or "")
        if not done:
            return NOTHING
        if item_type == "agent_message":
            text = as_str(item.get("text"))
            if text is None:
                return NOTHING
            self._final_message = text
            summary = one_line(text, scrub=self.scrub) or "empty message"
            return Observation(events=(self._events.make("message", summary),))
        if item_type == "error":
            message = first_line(as_str(item.get("message")) or "") or "unknown error"
            return Observation(
                events=(self._events.make("error", one_line(message, scrub=self.scrub)),)
            )
        return NOTHING

    def _command(self, item_id: str, item: dict[str, Any], done: bool) -> Observation:
        running = self._running.get(item_id) if item_id else None
        command = running.command if running else self._unwrap(as_str(item.get("command")))
        if not command:
            return NOTHING
        if not item_id:  # every build names its items; a nameless one is its own command
            self._nameless += 1
            item_id = f"nameless-{self._nameless}"
        progress: list[str] = []
        events: list[SessionEvent] = []
        if item_id not in self._announced:
            self._announced.add(item_id)
            line = command_progress(command, self.scrub)
            progress.append(line)
            events.append(
                self._events.make("tool_call", line, tool="command_execution", target=command)
            )
            self._running[item_id] = _Command(command)
        status = as_str(item.get("status"))
        # At the end of a turn codex re-emits unfinished items as completed "in_progress".
        if done and status != "in_progress" and item_id in self._running:
            del self._running[item_id]
            self._announced.discard(item_id)  # finished items are not re-emitted
            exit_code = as_int(item.get("exit_code"))
            output = first_line(as_str(item.get("aggregated_output")) or "")
            if status == "declined":
                summary = "declined"
            elif output:
                summary = output if exit_code in (0, None) else f"exit {exit_code}: {output}"
            else:
                summary = "no output" if exit_code in (0, None) else f"exit {exit_code}"
            events.append(
                self._events.make(
                    "tool_result",
                    one_line(summary, scrub=self.scrub),
                    tool="command_execution",
                    target=command,
                    exit_status=exit_code,
                )
            )
        return Observation(progress=tuple(progress), events=tuple(events))

    @staticmethod
    def _unwrap(command: str | None) -> str:
        return unwrap_shell(command or "").strip()

    def _file_change(self, item_id: str, item: dict[str, Any]) -> Observation:
        if item_id in self._announced:
            return NOTHING
        changes = item.get("changes")
        lines: list[str] = []
        paths: list[str] = []
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, dict):
                continue
            path = as_str(change.get("path"))
            if not path:
                continue
            verb = _CHANGE_VERBS.get(as_str(change.get("kind")) or "", "Edit")
            lines.append(cut(f"{verb} {path}", scrub=self.scrub))
            paths.append(path)
        if not lines:
            return NOTHING
        self._announced.add(item_id)
        event = self._events.make(
            "tool_call", ", ".join(lines), tool="file_change", target=" ".join(paths)
        )
        return Observation(progress=tuple(lines), events=(event,))

    def _mcp_call(self, item_id: str, item: dict[str, Any], done: bool) -> Observation:
        server = as_str(item.get("server")) or "mcp"
        tool = f"{server}.{as_str(item.get('tool')) or 'tool'}"
        observation = self._announce(item_id, tool, "")
        if not done or as_str(item.get("status")) == "in_progress":
            return observation
        error = item.get("error")
        message = as_str(error.get("message")) if isinstance(error, dict) else None
        summary = f"failed: {message}" if message else "done"
        result = self._events.make("tool_result", one_line(summary, scrub=self.scrub), tool=tool)
        return Observation(progress=observation.progress, events=(*observation.events, result))

    def _announce(self, item_id: str, tool: str, detail: str) -> Observation:
        if item_id in self._announced:
            return NOTHING
        self._announced.add(item_id)
        line = cut(f"{tool} {first_line(detail)}".strip(), scrub=self.scrub)
        target = detail or None
        return Observation(
            progress=(line,),
            events=(self._events.make("tool_call", line, tool=tool, target=target),),
        )

    # -- the end of the turn ---------------------------------------------------------------------

    def _turn_completed(self, event: dict[str, Any]) -> Observation:
        self._turn_ended = True
        self._take_killed()
        usage = event.get("usage")
        if isinstance(usage, dict):
            # The thread's running total, not the turn's own: the last one is the session's,
            # and a total below an earlier one is not codex's (the agent can write into the
            # stream).
            self._usage = at_least(self._usage or Usage(), _usage(usage))
        summary = one_line(self._final_message or "", scrub=self.scrub) or "no final message"
        return Observation(events=(self._events.make("result", summary),))

    def _turn_failed(self, event: dict[str, Any]) -> Observation:
        self._turn_ended = True
        self._take_killed()
        error = event.get("error")
        message = as_str(error.get("message")) if isinstance(error, dict) else None
        self._turn_failure_message = message
        self._turn_failure = one_line(
            f"{NAME}'s turn failed: {first_line(message or '') or 'no reason given'}",
            scrub=self.scrub,
        )
        return Observation(events=(self._events.make("error", self._turn_failure),))

    def _take_killed(self) -> None:
        for running in self._running.values():
            if running.command not in self._killed:
                self._killed.append(running.command)
        self._running.clear()

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        # Without a turn end the process died mid-turn: what it still ran died with it.
        self._take_killed()
        cause: str | None = None
        if self._turn_failure:
            cause = self._turn_failure
        elif not self._turn_ended:
            if exit_status:
                cause = exit_description(NAME, exit_status)
                if self._last_error:
                    cause = one_line(f"{cause}: {self._last_error}", scrub=self.scrub)
            else:
                cause = f"{NAME}'s stream ended without a result"
        elif exit_status and not stopped_after_result:
            cause = exit_description(NAME, exit_status) + " after its turn completed"
        return StreamOutcome(
            session_id=self._session_id,
            final_message=self._final_message,
            failed=cause is not None,
            failure_cause=cause,
            killed_work=tuple(self._killed),
            usage=self._usage or Usage(),
            result_seen=self._turn_ended,
            provider_outage=self._outage(cause),
        )

    def _outage(self, cause: str | None) -> ProviderOutage | None:
        """A failure whose last word is a provider status of an outage: codex's own retries
        (``Reconnecting... n/5``) are behind it."""
        if cause is None or (self._turn_ended and not self._turn_failure):
            return None  # a turn that completed did its work, whatever came after
        said = self._turn_failure_message if self._turn_failure else self._last_error
        if not self._turn_failure and (said or "").startswith("Reconnecting"):
            return None  # a retry it was still making, not its last word: the process died
        match = _FAILED_STATUS.search(said or "")
        if match is None or int(match.group(1)) not in OUTAGE_STATUSES:
            return None
        return ProviderOutage(NAME, int(match.group(1)), cause)


def _usage(usage: dict[str, Any]) -> Usage:
    """The thread's totals a ``turn.completed`` states."""
    return Usage(
        input_tokens=as_count(usage.get("input_tokens")),
        cached_input_tokens=as_count(usage.get("cached_input_tokens")),
        cache_write_tokens=as_count(usage.get("cache_write_input_tokens")),
        output_tokens=as_count(usage.get("output_tokens")),
    )


def _base_url_of(arg: str, provider: str) -> str | None:
    """The base URL ``arg`` gives ``provider``, or None when it gives none."""
    match = _BASE_URL.match(arg)
    prefix = f"model_providers.{provider}.base_url"
    return match.group(1) if match and arg.startswith(prefix) else None


def _env_key_of(arg: str, provider: str) -> re.Match[str] | None:
    match = _ENV_KEY.match(arg)
    return match if match and arg.startswith(f"model_providers.{provider}.env_key") else None
