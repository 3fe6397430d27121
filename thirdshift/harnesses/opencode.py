"""The OpenCode Harness: ``opencode run --format json``, and its stream reader.

Facts this adapter relies on (OpenCode 1.18.33, the pinned version; adr/0033):

- One prompt per process. stdout is one JSON object per line, each with ``type``,
  ``timestamp`` and ``sessionID``: ``step_start`` (a model request begins), ``text`` (a finished
  text part), ``reasoning``, ``tool_use`` (printed once, when the tool has finished: its input,
  its status ``completed`` or ``error``, its output, and for ``bash`` the exit code in
  ``metadata.exit``), ``step_finish`` (the step's ``reason``, ``tool-calls`` while the agent
  goes on, its ``tokens`` and its ``cost`` in dollars) and ``error`` (the provider's failure
  after OpenCode's own retries, with ``statusCode``).
- ``--session <id>`` continues a session natively; the stream then carries the same id. An
  unknown id prints nothing on stdout, ``Error: Session not found`` on stderr, exit 1.
- Every figure is the step's own: a session's usage is the sum of its steps, a resume's too.
- SIGINT and SIGTERM end it at once (exit -2, -15), leaving its tool commands, which run in
  process groups of their own, to the process tree's sweep. It shows no background work.
- It joins the words of its message with spaces and quotes each one that has a space, so the
  prompt reaches the model inside double quotes.

About 510 lines: one module holds every fact about one Harness (as ``claude`` does), how the
providers of its inline configuration are pointed at the model gateway included (adr/0038).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from thirdshift.harness_registry import OPENCODE
from thirdshift.harnesses.base import NOTHING, Observation, StreamOutcome, Usage
from thirdshift.harnesses.model_gateway import (
    STAND_IN_KEY,
    GatewayPlan,
    ModelKeyInside,
    Route,
    route_for,
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
    copy_config,
    cut,
    decode,
    exit_description,
    first_line,
    one_line,
    option,
    provider_endpoints,
    user_home,
)
from thirdshift.network import HostPattern
from thirdshift.records import ProviderOutage, plus

NAME = OPENCODE.name

# The session's title, given so that OpenCode does not ask the model for one (a request of its
# own, to its small model, before the agent's first).
SESSION_TITLE = "thirdshift"
# What a model named without its provider (``claude-sonnet-4-5``) is taken to be served by.
DEFAULT_PROVIDER = "anthropic"

_PROVIDER_VARIABLES = frozenset({"OPENCODE_CONFIG_CONTENT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"})
# Switches that keep it hermetic: no models list or update fetched, no plugin, LSP server or
# skill downloaded, nothing shared, no Claude Code settings read and no configuration taken from
# the repository (the author writes that). npm offline: without it, OpenCode has npm
# install its plugin package into its configuration directory from the registry.
_HERMETIC = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_PURE": "1",
    "npm_config_offline": "true",
}
# The provider packages compiled into the binary: any other ``npm`` a provider names would be
# installed from the package registry when the session starts.
BUNDLED_PROVIDER_PACKAGES = frozenset(
    {"@ai-sdk/anthropic", "@ai-sdk/openai", "@ai-sdk/openai-compatible"}
)
_PROVIDER_HOSTS = ("api.anthropic.com:443", "api.openai.com:443")
_DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com/v1",
    "openai": "https://api.openai.com/v1",
}
# Its configuration and login: opencode.json(c) under XDG_CONFIG_HOME/opencode, auth.json under
# XDG_DATA_HOME/opencode, beside the sessions database a private home must not share.
_CONFIG_FILES = ("opencode.json", "opencode.jsonc", "config.json")
_AUTH_FILES = ("auth.json",)
_UNKNOWN_RESUME = "Session not found"
# How it fails a provider whose package it would have to install (npm is offline), and the fix.
_UNINSTALLED_PROVIDER = "Failed to initialize provider"
_UNINSTALLED_FIX = (
    " (a package OpenCode lacks: use the anthropic provider or npm @ai-sdk/openai-compatible)"
)
_VERSION = re.compile(r"^\s*v?(\d+\.\d+\.\d+[\w.+-]*)\s*$", re.M)
_SECRET_KEY = re.compile(r"key|token|secret|password|authorization|cookie", re.I)
# With no provider configured it falls back to its makers' own service, which is never one
# thirdshift configured.
_OWN_SERVICE = re.compile(r"^https?://(?:[\w-]+\.)*opencode\.ai(?:[:/]|$)")
_NO_PROVIDER_FIX = " (no model provider: set OPENCODE_CONFIG_CONTENT or ANTHROPIC_API_KEY)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The tools whose input names a file, and the key it is under.
_PATH_KEYS = ("filePath", "path", "pattern", "url")


@dataclass
class OpenCodeHarness:
    """OpenCode, run as ``opencode run --format json --auto`` (every permission it would ask
    for is granted: nobody is there to answer; the Worktree and the sandbox are the limits)."""

    name = NAME
    reports_cost = True
    executable: str = OPENCODE.executable
    extra_args: tuple[str, ...] = ()

    def argv(self, prompt: str, *, model: str | None, resume_id: str | None) -> list[str]:
        if model and "/" not in model:
            model = f"{DEFAULT_PROVIDER}/{model}"
        return [
            self.executable,
            "run",
            "--format",
            "json",
            "--auto",
            "--title",
            SESSION_TITLE,
            *self.extra_args,
            *option("--model", model),
            *option("--session", resume_id),
            # After "--" a prompt starting with "-" is still the message, not an option.
            "--",
            prompt,
        ]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = allowlisted(base, _PROVIDER_VARIABLES, also=_key_variables(base))
        env.update(_HERMETIC)
        return _without_snapshots(env)

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        # Both end it at once; SIGINT first, as a terminal would.
        return (signal.SIGINT, signal.SIGTERM)

    def reader(self, scrub: Scrub | None = None) -> OpenCodeReader:
        return OpenCodeReader(scrub=scrub)

    def private_home(
        self, base: Mapping[str, str], home: Path, *, login: bool = True
    ) -> dict[str, str]:
        # Its four XDG directories all move into the home: the sessions database (data), the
        # Worktree snapshots it would take (data; off, see _without_snapshots), logs, caches and
        # locks.
        user = user_home(base)
        config_source = base.get("XDG_CONFIG_HOME") or (str(user / ".config") if user else "")
        data_source = base.get("XDG_DATA_HOME") or (str(user / ".local/share") if user else "")
        dirs = {
            "XDG_CONFIG_HOME": home / ".config",
            "XDG_DATA_HOME": home / ".local" / "share",
            "XDG_CACHE_HOME": home / ".cache",
            "XDG_STATE_HOME": home / ".local" / "state",
        }
        # Behind the model gateway its configuration files stay behind too: they commonly hold
        # a provider's apiKey, which the gateway would not know (the inline configuration does).
        if config_source and login:
            copy_config(
                Path(config_source) / "opencode",
                dirs["XDG_CONFIG_HOME"] / "opencode",
                _CONFIG_FILES,
            )
        if data_source and login:
            copy_config(
                Path(data_source) / "opencode", dirs["XDG_DATA_HOME"] / "opencode", _AUTH_FILES
            )
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return {"HOME": str(home), **{key: str(path) for key, path in dirs.items()}}

    def version_argv(self) -> list[str] | None:
        # Its stream names no version: ``opencode --version`` prints ``1.18.33``.
        return [self.executable, "--version"]

    def parse_version(self, output: str) -> str | None:
        found = _VERSION.search(output)
        return found.group(1) if found else None

    def resume_usage(self, reported: Usage, resumed: Usage) -> Usage:
        # Each step reports its own figures: a resume's stream holds only its own steps.
        return reported

    def provider_endpoints(self, env: Mapping[str, str]) -> tuple[HostPattern, ...]:
        return provider_endpoints(_PROVIDER_HOSTS, configured_base_urls(env))

    def behind_gateway(self, env: Mapping[str, str]) -> GatewayPlan:
        return opencode_behind_gateway(env)

    def resume_unknown(self, outcome: StreamOutcome, stderr_tail: str) -> bool:
        return _UNKNOWN_RESUME in _ANSI.sub("", f"{outcome.failure_cause or ''}\n{stderr_tail}")


def _without_snapshots(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``"snapshot": false`` in the inline configuration, unless it says otherwise
    or is not a JSON object (OpenCode then reports it). Its snapshots copy the Worktree into a
    git store in the private home at every step: for an undo nobody runs headless, at a second
    of CPU a short session, and on the session's disk budget (adr/0052)."""
    config = _read_config(env)
    if config is not None and "snapshot" not in config:
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps({**config, "snapshot": False})
    return env


def _read_config(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The inline configuration (empty when absent), or None when it is no JSON object."""
    try:
        config = json.loads(env.get("OPENCODE_CONFIG_CONTENT") or "{}")
    except json.JSONDecodeError:
        return None
    return config if isinstance(config, dict) else None


def _config(env: Mapping[str, str]) -> dict[str, Any]:
    """The inline configuration, or an empty one when it is absent or not a JSON object."""
    return _read_config(env) or {}


def _providers(env: Mapping[str, str]) -> list[dict[str, Any]]:
    providers = _config(env).get("provider")
    if not isinstance(providers, dict):
        return []
    return [entry for entry in providers.values() if isinstance(entry, dict)]


def configured_base_urls(env: Mapping[str, str]) -> list[str]:
    """The ``baseURL`` of each provider the inline configuration sets."""
    found: list[str] = []
    for provider in _providers(env):
        options = provider.get("options")
        url = as_str(options.get("baseURL")) if isinstance(options, dict) else None
        if url:
            found.append(url)
    return found


def unbundled_provider_packages(env: Mapping[str, str]) -> list[str]:
    """The ``npm`` packages the inline configuration's providers name that the binary does not
    carry: each would be fetched from the package registry when a session starts."""
    found: list[str] = []
    for provider in _providers(env):
        package = as_str(provider.get("npm"))
        if package and package not in BUNDLED_PROVIDER_PACKAGES:
            found.append(package)
    return found


def config_secrets(env: Mapping[str, str]) -> list[str]:
    """The values in the inline configuration under a key whose name says it is secret
    (``apiKey``, a ``token``, an ``Authorization`` header), for the scrubber to know: a
    variable's name says nothing of what is inside this one."""
    found: list[str] = []

    def walk(value: object, key: str) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                walk(inner, str(name))
        elif isinstance(value, list):
            for inner in value:
                walk(inner, key)
        elif isinstance(value, str) and _SECRET_KEY.search(key):
            found.append(value)
            found.extend(part for part in value.split() if part.lower() != "bearer")

    walk(_config(env), "")
    return found


def opencode_behind_gateway(env: Mapping[str, str]) -> GatewayPlan:
    """Each provider of the inline configuration with a key (``apiKey``, given or read from
    ``{env:VAR}``), and the built-in ``anthropic`` and ``openai`` providers whose key is in
    their variable, pointed at the model gateway with the stand-in key."""
    config = _config(env)
    providers = config.get("provider")
    providers = dict(providers) if isinstance(providers, dict) else {}
    for name, variable in (("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")):
        if env.get(variable) and name not in providers:
            providers[name] = {"options": {"apiKey": f"{{env:{variable}}}"}}
    routes: list[Route] = []
    dropped: set[str] = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
    for index, (name, entry) in enumerate(sorted(providers.items())):
        if not isinstance(entry, dict):
            continue
        options = dict(entry.get("options") or {})
        headers = options.get("headers")
        if isinstance(headers, dict) and any(_SECRET_KEY.search(str(h)) for h in headers):
            raise ModelKeyInside(
                f"OpenCode's provider {name!r} sends a credential in options.headers, which the "
                "model gateway cannot put outside the sandbox; give its key as options.apiKey "
                "instead, or set unsafe_agent_holds_model_key = true"
            )
        key = as_str(options.get("apiKey")) or ""
        if (read := re.fullmatch(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}", key)) is not None:
            dropped.add(read.group(1))
            key = env.get(read.group(1), "")
        if not key:
            continue  # a provider that takes no key has nothing to keep outside
        default = _DEFAULT_UPSTREAMS.get(str(name), "")
        route = route_for(f"p{index}", as_str(options.get("baseURL")) or "", default, key)
        routes.append(route)
        options.update(baseURL=route.url, apiKey=STAND_IN_KEY)
        providers[name] = {**entry, "options": options}
    if not routes:
        raise ModelKeyInside(
            "OpenCode has no model key in its inline configuration, ANTHROPIC_API_KEY or "
            "OPENAI_API_KEY, so it would use its login (auth.json), which it reads inside the "
            "sandbox; set a key there (the model gateway then keeps it outside), or set "
            "unsafe_agent_holds_model_key = true"
        )
    content = json.dumps({**config, "provider": providers})
    return GatewayPlan(
        routes=tuple(routes), env={"OPENCODE_CONFIG_CONTENT": content}, dropped=frozenset(dropped)
    )


def _key_variables(base: Mapping[str, str]) -> list[str]:
    # A provider's options may read its key from a variable: "apiKey": "{env:VAR}".
    text = base.get("OPENCODE_CONFIG_CONTENT") or ""
    return re.findall(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}", text)


@dataclass
class OpenCodeReader:
    """Follows one ``opencode run --format json`` stdout. ``scrub`` is applied to every text
    before it is cut (see ``Harness.reader``)."""

    scrub: Scrub | None = None
    _session_id: str | None = None
    _result_seen: bool = False
    _final_message: str | None = None
    _error: str | None = None
    _error_status: int | None = None
    # The finished steps' figures added up (a step counts as a turn).
    _steps: Usage = field(default_factory=Usage)
    _events: EventLog = field(init=False)

    def __post_init__(self) -> None:
        self._events = EventLog(self.scrub)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def result_seen(self) -> bool:
        return self._result_seen

    @property
    def usage_so_far(self) -> Usage:
        """The sum of the finished steps; the cost is OpenCode's own figure when it priced the
        model (zero for a model it has no price for: the ledger prices the tokens then)."""
        cost = self._steps.cost_usd
        return replace(
            self._steps, cost_usd=cost if cost else None, cost_source="reported" if cost else None
        )

    def feed(self, line: bytes) -> Observation:
        event = decode(line)
        if event is None:
            return NOTHING
        kind = event.get("type")
        progress: tuple[str, ...] = ()
        session = as_str(event.get("sessionID"))
        if session and self._session_id is None and kind in _KNOWN:
            self._session_id = session
            progress = ("session started",)
        part = event.get("part")
        part = part if isinstance(part, dict) else {}
        if kind == "text":
            observed = self._text(part)
        elif kind == "tool_use":
            observed = self._tool(part)
        elif kind == "step_finish":
            observed = self._step_finish(part)
        elif kind == "error":
            observed = self._failure(event.get("error"))
        else:
            observed = NOTHING
        return Observation(progress=progress + observed.progress, events=observed.events)

    def _text(self, part: dict[str, Any]) -> Observation:
        text = as_str(part.get("text"))
        if not text:
            return NOTHING
        self._final_message = text
        summary = one_line(text, scrub=self.scrub) or "empty message"
        return Observation(events=(self._events.make("message", summary),))

    def _tool(self, part: dict[str, Any]) -> Observation:
        tool = as_str(part.get("tool")) or "tool"
        state = part.get("state")
        state = state if isinstance(state, dict) else {}
        tool_input = state.get("input")
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        if tool == "bash":
            target = as_str(tool_input.get("command")) or ""
            line = command_progress(target, self.scrub)
        else:
            target = next(
                (value for key in _PATH_KEYS if (value := as_str(tool_input.get(key)))), ""
            )
            line = cut(f"{tool} {first_line(target)}".strip(), scrub=self.scrub)
        call = self._events.make("tool_call", line, tool=tool, target=target or None)
        metadata = state.get("metadata")
        exit_code = as_int(metadata.get("exit")) if isinstance(metadata, dict) else None
        if as_str(state.get("status")) == "error":
            summary = f"failed: {first_line(as_str(state.get('error')) or 'no reason given')}"
        else:
            output = first_line(as_str(state.get("output")) or "")
            summary = output or "no output"
            if exit_code not in (0, None):
                summary = f"exit {exit_code}: {output}" if output else f"exit {exit_code}"
        result = self._events.make(
            "tool_result",
            one_line(summary, scrub=self.scrub),
            tool=tool,
            target=target or None,
            exit_status=exit_code,
        )
        return Observation(progress=(line,), events=(call, result))

    def _step_finish(self, part: dict[str, Any]) -> Observation:
        self._steps = plus(self._steps, _step_usage(part))
        if as_str(part.get("reason")) in ("tool-calls", None):
            return NOTHING
        self._result_seen = True
        summary = one_line(self._final_message or "", scrub=self.scrub) or "no final message"
        return Observation(events=(self._events.make("result", summary),))

    def _failure(self, error: object) -> Observation:
        error = error if isinstance(error, dict) else {}
        data = error.get("data")
        data = data if isinstance(data, dict) else {}
        name = as_str(error.get("name")) or "error"
        message = first_line(as_str(data.get("message")) or "") or name
        self._error_status = as_int(data.get("statusCode"))
        status = f" {self._error_status}" if self._error_status else ""
        if message.startswith(_UNINSTALLED_PROVIDER):
            message += _UNINSTALLED_FIX
        metadata = data.get("metadata")
        url = as_str(metadata.get("url")) if isinstance(metadata, dict) else None
        if url and _OWN_SERVICE.match(url):
            message += _NO_PROVIDER_FIX
        self._error = one_line(f"{name}{status}: {message}", scrub=self.scrub)
        return Observation(events=(self._events.make("error", self._error),))

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        cause: str | None = None
        if self._error:
            cause = one_line(f"{NAME} failed: {self._error}", scrub=self.scrub)
        elif not self._result_seen:
            if exit_status:
                cause = exit_description(NAME, exit_status)
            else:
                cause = f"{NAME}'s stream ended without a result"
        elif exit_status and not stopped_after_result:
            cause = exit_description(NAME, exit_status) + " after its last step"
        outage = None
        if self._error and self._error_status in OUTAGE_STATUSES and cause:
            outage = ProviderOutage(NAME, self._error_status, cause)
        return StreamOutcome(
            session_id=self._session_id,
            final_message=self._final_message,
            failed=cause is not None,
            failure_cause=cause,
            usage=self.usage_so_far,
            result_seen=self._result_seen,
            provider_outage=outage,
        )


_KNOWN = frozenset({"step_start", "text", "reasoning", "tool_use", "step_finish", "error"})


def _step_usage(part: dict[str, Any]) -> Usage:
    """What one ``step_finish`` states: its tokens and its cost, as one turn."""
    tokens = part.get("tokens")
    tokens = tokens if isinstance(tokens, dict) else {}
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    read = as_count(cache.get("read"))
    written = as_count(cache.get("write"))
    fresh = as_count(tokens.get("input"))
    # Its "input" leaves out the cache's reads and writes: ours counts every input token.
    said = fresh is not None or read or written
    inputs = (fresh or 0) + (read or 0) + (written or 0) if said else None
    # Its reasoning tokens are output tokens too.
    output = as_count(tokens.get("output"))
    reasoning = as_count(tokens.get("reasoning"))
    both = None if output is None and reasoning is None else (output or 0) + (reasoning or 0)
    cost = part.get("cost")
    if not isinstance(cost, int | float) or isinstance(cost, bool) or not cost >= 0:
        cost = None  # none stated, or not a price (NaN reads as JSON too)
    return Usage(
        turns=1,
        input_tokens=inputs,
        cached_input_tokens=read,
        cache_write_tokens=written,
        output_tokens=both,
        cost_usd=None if cost is None else float(cost),
    )
