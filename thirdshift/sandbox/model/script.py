"""The script the scripted model server plays: sessions of turns, loaded from JSON or TOML.

The format is described for script authors in ``docs/model-script.md``. Everything here is an
immutable value; the server keeps its own cursors.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from thirdshift.errors import SandboxError

TurnKind = Literal["text", "tool_calls", "error", "hang"]
ErrorKind = Literal["rate_limit", "overloaded", "api_error"]

ERROR_KINDS: tuple[ErrorKind, ...] = ("rate_limit", "overloaded", "api_error")
DEFAULT_FINAL_TEXT = "Scripted session complete."

_TURN_KEYS = frozenset(
    {
        "text",
        "tool_calls",
        "error",
        "message",
        "status",
        "retry_after_s",
        "hang",
        "delay_ms",
        "input_tokens",
    }
)
_SESSION_KEYS = frozenset({"name", "marker", "turns", "final_text"})
_SCRIPT_KEYS = frozenset({"sessions", "final_text"})
_TOOL_KEYS = frozenset({"name", "input"})


class ScriptProblem(ValueError):
    """Raised inside parsing with the location of the fault; turned into SandboxError."""


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call the model makes.

    ``input`` is sent verbatim: for Claude Code it is the ``tool_use`` input object, for Codex
    an object becomes a ``function_call`` whose ``arguments`` is its JSON text, and a string
    becomes a ``custom_tool_call`` (Codex's freeform tools such as ``apply_patch``).
    """

    name: str
    input: dict[str, Any] | str


@dataclass(frozen=True)
class Turn:
    """The answer to one model request."""

    kind: TurnKind
    text: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    error: ErrorKind | None = None
    error_message: str | None = None
    error_status: int | None = None
    retry_after_s: float | None = None
    delay_ms: int = 0
    input_tokens: int | None = None
    """The input tokens the answer reports (default: an estimate from the request's size), so a
    script can make a session as costly as a test needs."""


@dataclass(frozen=True)
class Session:
    """A conversation's worth of turns, found by ``marker`` or taken in order."""

    name: str
    marker: str | None
    turns: tuple[Turn, ...]
    final_text: str


@dataclass(frozen=True)
class ModelScript:
    """Sessions in script order plus the text used once a session (or the script) runs out."""

    sessions: tuple[Session, ...]
    final_text: str = DEFAULT_FINAL_TEXT

    @classmethod
    def load(cls, path: Path) -> ModelScript:
        """Read a ``.json`` or ``.toml`` script; any fault raises SandboxError naming the file."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise SandboxError(f"model script {path}: cannot be read ({exc.strerror})") from exc
        try:
            if path.suffix.lower() == ".toml":
                data: Any = tomllib.loads(raw.decode("utf-8"))
            else:
                data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise SandboxError(f"model script {path}: not valid {_format(path)} ({exc})") from exc
        try:
            return _parse_script(data)
        except ScriptProblem as exc:
            raise SandboxError(f"model script {path}: {exc}") from exc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelScript:
        """Build a script from already-parsed data; a fault raises SandboxError."""
        try:
            return _parse_script(data)
        except ScriptProblem as exc:
            raise SandboxError(f"model script: {exc}") from exc


def _format(path: Path) -> str:
    return "TOML" if path.suffix.lower() == ".toml" else "JSON"


def _parse_script(data: Any) -> ModelScript:
    if not isinstance(data, Mapping):
        raise ScriptProblem("the top level must be an object with a 'sessions' list")
    _reject_unknown(data, _SCRIPT_KEYS, "the top level")
    final_text = _optional_str(data, "final_text", "the top level") or DEFAULT_FINAL_TEXT
    sessions_raw = data.get("sessions")
    if not isinstance(sessions_raw, list):
        raise ScriptProblem("'sessions' must be a list of sessions")
    sessions = tuple(
        _parse_session(item, index, final_text) for index, item in enumerate(sessions_raw)
    )
    seen: set[str] = set()
    for session in sessions:
        if session.name in seen:
            raise ScriptProblem(f"session name {session.name!r} is used twice")
        seen.add(session.name)
    return ModelScript(sessions=sessions, final_text=final_text)


def _parse_session(data: Any, index: int, default_final: str) -> Session:
    where = f"sessions[{index}]"
    if not isinstance(data, Mapping):
        raise ScriptProblem(f"{where} must be an object")
    _reject_unknown(data, _SESSION_KEYS, where)
    name = _optional_str(data, "name", where) or f"session-{index}"
    marker = _optional_str(data, "marker", where)
    if marker == "":
        raise ScriptProblem(f"{where}.marker must not be empty")
    turns_raw = data.get("turns")
    if not isinstance(turns_raw, list):
        raise ScriptProblem(f"{where}.turns must be a list of turns")
    turns = tuple(_parse_turn(item, f"{where}.turns[{i}]") for i, item in enumerate(turns_raw))
    final_text = _optional_str(data, "final_text", where) or default_final
    return Session(name=name, marker=marker, turns=turns, final_text=final_text)


def _parse_turn(data: Any, where: str) -> Turn:
    if not isinstance(data, Mapping):
        raise ScriptProblem(f"{where} must be an object")
    _reject_unknown(data, _TURN_KEYS, where)
    delay_ms = data.get("delay_ms", 0)
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 0:
        raise ScriptProblem(f"{where}.delay_ms must be a non-negative integer")
    kinds = [key for key in ("text", "tool_calls", "error", "hang") if key in data]
    if "text" in kinds and "tool_calls" in kinds:
        kinds.remove("text")  # text before tool calls is allowed
    if len(kinds) != 1:
        raise ScriptProblem(
            f"{where} must have exactly one of 'text', 'tool_calls', 'error', 'hang'"
            + (f" (has {', '.join(kinds)})" if kinds else "")
        )
    kind = kinds[0]
    input_tokens = data.get("input_tokens")
    if input_tokens is not None and (
        isinstance(input_tokens, bool) or not isinstance(input_tokens, int) or input_tokens < 0
    ):
        raise ScriptProblem(f"{where}.input_tokens must be a non-negative integer")
    if input_tokens is not None and kind not in ("text", "tool_calls"):
        raise ScriptProblem(f"{where}.input_tokens belongs only to a text or tool_calls turn")
    if kind != "error":
        for key in ("message", "status", "retry_after_s"):
            if key in data:
                raise ScriptProblem(f"{where}.{key} belongs only to an error turn")
    text = _optional_str(data, "text", where)
    if kind == "text":
        return Turn(kind="text", text=text, delay_ms=delay_ms, input_tokens=input_tokens)
    if kind == "hang":
        if data["hang"] is not True:
            raise ScriptProblem(f"{where}.hang must be true")
        return Turn(kind="hang", delay_ms=delay_ms)
    if kind == "tool_calls":
        calls_raw = data["tool_calls"]
        if not isinstance(calls_raw, list) or not calls_raw:
            raise ScriptProblem(f"{where}.tool_calls must be a non-empty list")
        calls = tuple(
            _parse_tool_call(item, f"{where}.tool_calls[{i}]") for i, item in enumerate(calls_raw)
        )
        return Turn(
            kind="tool_calls",
            text=text,
            tool_calls=calls,
            delay_ms=delay_ms,
            input_tokens=input_tokens,
        )
    return _parse_error_turn(data, where, delay_ms)


def _parse_error_turn(data: Mapping[str, Any], where: str, delay_ms: int) -> Turn:
    error = data["error"]
    if error not in ERROR_KINDS:
        raise ScriptProblem(f"{where}.error must be one of {', '.join(ERROR_KINDS)}, not {error!r}")
    status = data.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599
    ):
        raise ScriptProblem(f"{where}.status must be an HTTP error status (400-599)")
    retry_after = data.get("retry_after_s")
    if retry_after is not None and (
        isinstance(retry_after, bool) or not isinstance(retry_after, int | float) or retry_after < 0
    ):
        raise ScriptProblem(f"{where}.retry_after_s must be a non-negative number")
    return Turn(
        kind="error",
        error=error,
        error_message=_optional_str(data, "message", where),
        error_status=status,
        retry_after_s=None if retry_after is None else float(retry_after),
        delay_ms=delay_ms,
    )


def _parse_tool_call(data: Any, where: str) -> ScriptedToolCall:
    if not isinstance(data, Mapping):
        raise ScriptProblem(f"{where} must be an object with 'name' and 'input'")
    _reject_unknown(data, _TOOL_KEYS, where)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ScriptProblem(f"{where}.name must be a non-empty string")
    tool_input = data.get("input", {})
    if isinstance(tool_input, Mapping):
        return ScriptedToolCall(name=name, input=copy.deepcopy(dict(tool_input)))
    if isinstance(tool_input, str):
        return ScriptedToolCall(name=name, input=tool_input)
    raise ScriptProblem(f"{where}.input must be an object (or a string for a freeform tool)")


def _optional_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ScriptProblem(f"{where}.{key} must be a string")
    return value


def _reject_unknown(data: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise ScriptProblem(
            f"{where} has unknown key(s) {', '.join(unknown)};"
            f" allowed: {', '.join(sorted(allowed))}"
        )
