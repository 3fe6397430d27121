"""What the scripted model server says on the wire, for each provider API.

Pure functions: a turn in, server-sent events or a JSON body out. The Anthropic Messages API
(Claude Code) and the OpenAI Responses API (Codex) are rendered separately; the request side
(prompt text, tool-call ids a conversation echoes back) lives here too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from thirdshift.sandbox.model.script import ErrorKind, ScriptedToolCall, Turn

Api = Literal["anthropic", "openai"]

# Pieces an input JSON is cut into, so clients really assemble input_json_delta fragments.
_JSON_PIECE = 40


@dataclass(frozen=True)
class ModelReply:
    """A rendered non-error answer: text and tool calls with the ids the server gave them."""

    text: str | None
    calls: tuple[tuple[str, ScriptedToolCall], ...]  # (call id, call)


def estimate_tokens(raw: bytes) -> int:
    """A conservative token count: one token per three bytes, never zero."""
    return max(1, len(raw) // 3)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


# --- the request side ---------------------------------------------------------------------


def prompt_text(api: Api, body: dict[str, Any]) -> str:
    """The text of the user messages that open the conversation (before any model output).

    Tool results are left out, so a file the agent reads cannot smuggle in a marker.
    """
    parts: list[str] = []
    if api == "anthropic":
        for message in body.get("messages") or []:
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "system"):
                break
            if role == "user":
                parts.extend(_anthropic_texts(message.get("content")))
        return "\n".join(parts)
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in items or []:
        if not isinstance(item, dict):
            break
        role = item.get("role")
        if item.get("type", "message") != "message" or role not in ("user", "developer", "system"):
            break
        if role == "user":
            parts.extend(_openai_texts(item.get("content")))
    return "\n".join(parts)


def _anthropic_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def _openai_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in ("input_text", "text")
        and isinstance(part.get("text"), str)
    ]


def echoed_call_ids(api: Api, body: dict[str, Any]) -> list[str]:
    """Ids of earlier tool calls that the conversation carries back to the model."""
    ids: list[str] = []
    if api == "anthropic":
        for message in body.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "assistant":
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        ids.append(str(block.get("id")))
        return ids
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") in ("function_call", "custom_tool_call"):
            ids.append(str(item.get("call_id")))
    return ids


# --- errors -------------------------------------------------------------------------------

_ANTHROPIC_ERRORS: dict[ErrorKind, tuple[int, str, str]] = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your rate limit.",
    ),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "api_error": (500, "api_error", "Internal server error"),
}
_OPENAI_ERRORS: dict[ErrorKind, tuple[int, str, str | None, str]] = {
    "rate_limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached. Please try again later.",
    ),
    "overloaded": (503, "server_error", None, "The server is overloaded, please try again later."),
    "api_error": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
}


def error_response(api: Api, turn: Turn) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, extra headers and JSON body of an error turn, as the provider sends them."""
    assert turn.error is not None
    headers: dict[str, str] = {}
    if turn.retry_after_s is not None:
        headers["retry-after"] = str(round(turn.retry_after_s))
        headers["retry-after-ms"] = str(round(turn.retry_after_s * 1000))
    if api == "anthropic":
        status, err_type, message = _ANTHROPIC_ERRORS[turn.error]
        request_id = new_id("req")
        headers["request-id"] = request_id
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": err_type, "message": turn.error_message or message},
            "request_id": request_id,
        }
    else:
        status, err_type, code, message = _OPENAI_ERRORS[turn.error]
        headers["x-request-id"] = new_id("req")
        body = {
            "error": {
                "message": turn.error_message or message,
                "type": err_type,
                "param": None,
                "code": code,
            }
        }
    return turn.error_status or status, headers, body


def not_found_body(api: Api, method: str, path: str) -> dict[str, Any]:
    message = f"{method} {path} is not served by the scripted model server"
    if api == "anthropic":
        return {"type": "error", "error": {"type": "not_found_error", "message": message}}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


# --- Anthropic Messages API ---------------------------------------------------------------


def anthropic_message(model: str, reply: ModelReply, input_tokens: int) -> dict[str, Any]:
    """The whole message, as a non-streamed answer gives it."""
    content: list[dict[str, Any]] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    for call_id, call in reply.calls:
        content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": call.input})
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(input_tokens, _output_tokens(reply)),
    }


def anthropic_events(model: str, reply: ModelReply, input_tokens: int) -> Iterator[bytes]:
    """message_start, one start/delta.../stop triple per block, message_delta, message_stop."""
    start = anthropic_message(model, reply, input_tokens)
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(input_tokens, 1))
    yield sse("message_start", {"type": "message_start", "message": start})
    index = 0
    if reply.text is not None:
        yield _block_start(index, {"type": "text", "text": ""})
        for piece in _pieces(reply.text, _JSON_PIECE) or [""]:
            yield _block_delta(index, {"type": "text_delta", "text": piece})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call_id, call in reply.calls:
        yield _block_start(
            index, {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
        )
        for piece in _pieces(json.dumps(call.input), _JSON_PIECE):
            yield _block_delta(index, {"type": "input_json_delta", "partial_json": piece})
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": _output_tokens(reply)},
        },
    )
    yield sse("message_stop", {"type": "message_stop"})


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _anthropic_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


# --- OpenAI Responses API -----------------------------------------------------------------


def openai_output_items(reply: ModelReply) -> list[dict[str, Any]]:
    """The finished output items: an assistant message (if any text), then the tool calls."""
    items: list[dict[str, Any]] = []
    if reply.text is not None:
        items.append(
            {
                "type": "message",
                "id": new_id("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call_id, call in reply.calls:
        if isinstance(call.input, str):
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": new_id("ctc"),
                    "status": "completed",
                    "call_id": call_id,
                    "name": call.name,
                    "input": call.input,
                }
            )
        else:
            items.append(
                {
                    "type": "function_call",
                    "id": new_id("fc"),
                    "status": "completed",
                    "call_id": call_id,
                    "name": call.name,
                    "arguments": json.dumps(call.input),
                }
            )
    return items


def openai_response(
    model: str, reply: ModelReply, input_tokens: int, status: str = "completed"
) -> dict[str, Any]:
    """The response object; ``status`` ``in_progress`` gives the one response.created carries."""
    done = status == "completed"
    output_tokens = _output_tokens(reply)
    return {
        "id": new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": openai_output_items(reply) if done else [],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
        if done
        else None,
    }


def openai_events(model: str, reply: ModelReply, input_tokens: int) -> Iterator[bytes]:
    """response.created, per item added/deltas/done, response.completed (with usage)."""
    seq = 0

    def event(kind: str, data: dict[str, Any]) -> bytes:
        nonlocal seq
        payload = {"type": kind, "sequence_number": seq, **data}
        seq += 1
        return sse(kind, payload)

    final = openai_response(model, reply, input_tokens)
    created = dict(final, status="in_progress", output=[], usage=None)
    yield event("response.created", {"response": created})
    yield event("response.in_progress", {"response": created})
    for index, item in enumerate(final["output"]):
        yield from _openai_item_events(event, index, item)
    yield event("response.completed", {"response": final})


def _openai_item_events(event: Any, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    item_id = item["id"]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield event(
            "response.output_item.added",
            {"output_index": index, "item": dict(item, status="in_progress", content=[])},
        )
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield event("response.content_part.added", {**where, "part": part})
        for piece in _pieces(text, _JSON_PIECE):
            yield event("response.output_text.delta", {**where, "delta": piece})
        yield event("response.output_text.done", {**where, "text": text})
        yield event("response.content_part.done", {**where, "part": dict(part, text=text)})
    elif item["type"] == "function_call":
        yield event(
            "response.output_item.added",
            {"output_index": index, "item": dict(item, status="in_progress", arguments="")},
        )
        where = {"item_id": item_id, "output_index": index}
        for piece in _pieces(item["arguments"], _JSON_PIECE):
            yield event("response.function_call_arguments.delta", {**where, "delta": piece})
        yield event(
            "response.function_call_arguments.done", {**where, "arguments": item["arguments"]}
        )
    else:
        yield event(
            "response.output_item.added",
            {"output_index": index, "item": dict(item, status="in_progress", input="")},
        )
        where = {"item_id": item_id, "output_index": index}
        for piece in _pieces(item["input"], _JSON_PIECE):
            yield event("response.custom_tool_call_input.delta", {**where, "delta": piece})
        yield event("response.custom_tool_call_input.done", {**where, "input": item["input"]})
    yield event("response.output_item.done", {"output_index": index, "item": item})


# --- shared -------------------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _output_tokens(reply: ModelReply) -> int:
    size = len((reply.text or "").encode())
    size += sum(len(json.dumps(call.input)) for _, call in reply.calls)
    return max(1, size // 3)
