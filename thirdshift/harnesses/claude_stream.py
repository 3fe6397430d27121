"""The content blocks of a Claude-shaped stream: what Claude Code's reader and Qwen Code's share.

Qwen Code prints Claude Code's shapes (adr/0034): ``assistant`` lines carry text and
``tool_use`` blocks, ``user`` lines carry ``tool_result`` blocks that answer them by id. Each
reader keeps the rest of its stream to itself (init lines, results, background work, usage),
and says how its CLI names its tools in a ``Tools``; a tool result's exit status, which each CLI
words its own way, is the reader's to tell (``ExitStatus``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thirdshift.harnesses.base import Observation
from thirdshift.harnesses.stream import (
    EventLog,
    Scrub,
    as_str,
    command_progress,
    cut,
    first_line,
    one_line,
)
from thirdshift.records import SessionEvent


@dataclass(frozen=True)
class Tools:
    """How one CLI names its tools and what their inputs say."""

    shell: str
    """The tool that runs a shell command (its input's ``command``)."""
    path_keys: tuple[str, ...]
    """The input fields that name a file, in order of preference."""
    detail_keys: tuple[str, ...]
    """For a call its file does not describe, the input field worth showing, in order."""
    background_key: str
    """The input flag that runs a call in the background."""
    file_tools: frozenset[str] | None = None
    """The tools whose progress line names their file (None: every tool whose input names
    one)."""
    background_tools: frozenset[str] | None = None
    """The tools the background flag is read of (None: every tool)."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call the stream announced, kept until its result comes."""

    name: str
    target: str | None
    background: bool = False


ExitStatus = Callable[[ToolCall | None, str, bool], int | None]
"""What a reader makes of one tool result (its call, when the stream announced it; its output;
whether it is an error): the exit status its Session event carries."""


class ContentBlocks:
    """Turns the blocks of ``assistant`` and ``user`` lines into progress lines and Session
    events, numbered in the reader's ``EventLog`` and scrubbed with its ``scrub``."""

    def __init__(self, tools: Tools, events: EventLog, scrub: Scrub | None) -> None:
        self._tools = tools
        self._events = events
        self._scrub = scrub
        self._calls: dict[str, ToolCall] = {}

    def assistant(self, event: dict[str, Any]) -> Observation:
        """Each text block as a message, each tool call as a progress line and an event."""
        progress: list[str] = []
        events: list[SessionEvent] = []
        for block in _content(event):
            kind = block.get("type")
            if kind == "text":
                text = as_str(block.get("text")) or ""
                if text.strip():
                    events.append(self._events.make("message", one_line(text, scrub=self._scrub)))
            elif kind == "tool_use":
                name = as_str(block.get("name")) or "tool"
                raw_input = block.get("input")
                tool_input = raw_input if isinstance(raw_input, dict) else {}
                line, target = self._describe(name, tool_input)
                background = self._background(name, tool_input)
                call_id = as_str(block.get("id"))
                if call_id:
                    self._calls[call_id] = ToolCall(name, target, background)
                progress.append(line)
                summary = line + (" (in the background)" if background else "")
                events.append(self._events.make("tool_call", summary, tool=name, target=target))
        return Observation(progress=tuple(progress), events=tuple(events))

    def user(self, event: dict[str, Any], exit_status: ExitStatus) -> Observation:
        """Each tool result as an event, with the call it answers and the exit status the
        reader reads in it."""
        events: list[SessionEvent] = []
        for block in _content(event):
            if block.get("type") != "tool_result":
                continue
            call = self._calls.pop(as_str(block.get("tool_use_id")) or "", None)
            output = _result_text(block.get("content"))
            is_error = block.get("is_error") is True
            status = exit_status(call, output, is_error)
            line = first_line(output) or "no output"
            summary = f"failed: {line}" if is_error else line
            events.append(
                self._events.make(
                    "tool_result",
                    one_line(summary, scrub=self._scrub),
                    tool=call.name if call else None,
                    target=call.target if call else None,
                    exit_status=status,
                )
            )
        return Observation(events=tuple(events))

    def _describe(self, name: str, tool_input: dict[str, Any]) -> tuple[str, str | None]:
        """The progress line of one tool call (scrubbed) and its target (command or path)."""
        tools, scrub = self._tools, self._scrub
        if name == tools.shell:
            command = as_str(tool_input.get("command")) or ""
            return command_progress(command, scrub), command or None
        if tools.file_tools is None or name in tools.file_tools:
            path = next((p for key in tools.path_keys if (p := as_str(tool_input.get(key)))), None)
            if path:
                return cut(f"{name} {path}", scrub=scrub), path
        for key in tools.detail_keys:
            detail = as_str(tool_input.get(key))
            if detail and detail.strip():
                return cut(f"{name} {first_line(detail)}", scrub=scrub), None
        return name, None

    def _background(self, name: str, tool_input: dict[str, Any]) -> bool:
        tools = self._tools
        if tools.background_tools is not None and name not in tools.background_tools:
            return False
        return tool_input.get(tools.background_key) is True


def _content(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            text
            for block in content
            if isinstance(block, dict) and (text := as_str(block.get("text"))) is not None
        )
    return ""
