"""The scripted model server in-process, spoken to with plain http.client.

Over 500 lines on purpose: both wire formats, every turn kind and every error, side by side.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from thirdshift.errors import SandboxError
from thirdshift.sandbox.model.server import (
    ModelScript,
    ScriptedModelServer,
    claude_env,
    codex_config_args,
    codex_env,
)

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "dummy"}
OPENAI_HEADERS = {"authorization": "Bearer dummy"}


# --- helpers ------------------------------------------------------------------------------


class Answer:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw

    def json(self) -> Any:
        return json.loads(self.raw)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """SSE frames as (event name, data), checking the framing on the way."""
        assert self.headers["content-type"].startswith("text/event-stream")
        text = self.raw.decode()
        assert text.endswith("\n\n")
        frames = []
        for block in text.split("\n\n")[:-1]:
            lines = block.split("\n")
            assert len(lines) == 2, block
            assert lines[0].startswith("event: "), block
            assert lines[1].startswith("data: "), block
            name, data = lines[0][len("event: ") :], json.loads(lines[1][len("data: ") :])
            assert data["type"] == name
            frames.append((name, data))
        return frames


def request(
    server: ScriptedModelServer,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10,
) -> Answer:
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        payload = None if body is None else json.dumps(body).encode()
        all_headers = {"content-type": "application/json", **(headers or {})}
        conn.request(method, path, body=payload, headers=all_headers)
        response = conn.getresponse()
        return Answer(
            response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        )
    finally:
        conn.close()


def claude_request(
    prompt: str, history: list[dict[str, Any]] | None = None, stream: bool = True
) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 1000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a test."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
            *(history or []),
        ],
    }


def codex_request(prompt: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "model": "gpt-test",
        "stream": True,
        "instructions": "You are a test.",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "dev"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
            *(history or []),
        ],
    }


def post_claude(server: ScriptedModelServer, body: dict[str, Any]) -> Answer:
    return request(server, "POST", "/v1/messages?beta=true", body, ANTHROPIC_HEADERS)


def post_codex(server: ScriptedModelServer, body: dict[str, Any]) -> Answer:
    return request(server, "POST", "/v1/responses", body, OPENAI_HEADERS)


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    started: list[ScriptedModelServer] = []

    def make(sessions: list[dict[str, Any]], **extra: Any) -> ScriptedModelServer:
        script = ModelScript.from_dict({"sessions": sessions, **extra})
        server = ScriptedModelServer(script, tmp_path / f"requests-{len(started)}.jsonl")
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


BASH = {"name": "Bash", "input": {"command": "echo hello > hello.txt", "description": "write"}}


# --- Anthropic Messages API ---------------------------------------------------------------


def test_anthropic_stream_of_a_tool_call(make_server: Any) -> None:
    server = make_server([{"turns": [{"text": "Let me write it.", "tool_calls": [BASH]}]}])

    answer = post_claude(server, claude_request("write a file"))

    assert answer.status == 200
    frames = answer.events()
    assert [name for name, _ in frames] == [
        "message_start",
        *["content_block_start", "content_block_delta", "content_block_stop"],
        "content_block_start",
        *["content_block_delta"] * (len(frames) - 8),
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = frames[0][1]["message"]
    assert start["role"] == "assistant"
    assert start["model"] == "claude-test"
    assert start["content"] == []
    assert start["usage"]["input_tokens"] > 0
    assert frames[1][1]["content_block"] == {"type": "text", "text": ""}
    assert frames[2][1]["delta"] == {"type": "text_delta", "text": "Let me write it."}
    tool_start = frames[4][1]
    assert tool_start["index"] == 1
    block = tool_start["content_block"]
    assert (block["type"], block["name"], block["input"]) == ("tool_use", "Bash", {})
    deltas = [data["delta"] for name, data in frames if name == "content_block_delta"][1:]
    assert len(deltas) > 1  # the input really arrives in pieces
    assert all(delta["type"] == "input_json_delta" for delta in deltas)
    assert json.loads("".join(delta["partial_json"] for delta in deltas)) == BASH["input"]
    message_delta = frames[-2][1]
    assert message_delta["delta"]["stop_reason"] == "tool_use"
    assert message_delta["usage"]["output_tokens"] > 0


def test_anthropic_stream_of_a_text_turn_ends_the_turn(make_server: Any) -> None:
    server = make_server([{"turns": [{"text": "All done."}]}])

    frames = post_claude(server, claude_request("hi")).events()

    assert [name for name, _ in frames] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert frames[4][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_answer_without_stream_is_one_message(make_server: Any) -> None:
    server = make_server([{"turns": [{"tool_calls": [BASH]}]}])

    answer = post_claude(server, claude_request("write", stream=False))

    assert answer.status == 200
    message = answer.json()
    assert message["type"] == "message"
    assert message["stop_reason"] == "tool_use"
    (block,) = message["content"]
    assert block["type"] == "tool_use"
    assert block["input"] == BASH["input"]
    assert block["id"].startswith("toolu_")


def test_count_tokens_is_a_conservative_estimate(make_server: Any) -> None:
    server = make_server([{"turns": []}])
    body = claude_request("x" * 3000)

    answer = request(server, "POST", "/v1/messages/count_tokens?beta=true", body, ANTHROPIC_HEADERS)

    assert answer.status == 200
    assert answer.json()["input_tokens"] >= len(json.dumps(body)) // 4
    assert server.requests()[0]["kind"] == "count_tokens"
    assert server.requests()[0]["session"] is None  # counting consumes no turn


# --- OpenAI Responses API -----------------------------------------------------------------


def test_openai_stream_of_a_function_call_and_a_freeform_call(make_server: Any) -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"
    server = make_server(
        [
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "exec_command", "input": {"cmd": "ls", "yield_time_ms": 500}},
                            {"name": "apply_patch", "input": patch},
                        ]
                    }
                ]
            }
        ]
    )

    frames = post_codex(server, codex_request("list")).events()

    names = [name for name, _ in frames]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    assert [data["sequence_number"] for _, data in frames] == list(range(len(frames)))
    assert frames[0][1]["response"]["status"] == "in_progress"
    added = [data for name, data in frames if name == "response.output_item.added"]
    done = [data["item"] for name, data in frames if name == "response.output_item.done"]
    assert [a["output_index"] for a in added] == [0, 1]
    assert names.index("response.output_item.done") < len(names) - 1
    call, custom = done
    assert call["type"] == "function_call"
    assert call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "ls", "yield_time_ms": 500}
    assert call["call_id"].startswith("call_")
    assert custom["type"] == "custom_tool_call"
    assert custom["name"] == "apply_patch"
    assert custom["input"] == patch
    arg_deltas = [d["delta"] for n, d in frames if n == "response.function_call_arguments.delta"]
    assert "".join(arg_deltas) == call["arguments"]
    completed = frames[-1][1]["response"]
    assert completed["status"] == "completed"
    assert completed["output"] == done
    usage = completed["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_openai_stream_of_a_message(make_server: Any) -> None:
    server = make_server([{"turns": [{"text": "Done codex"}]}])

    frames = post_codex(server, codex_request("hi")).events()

    assert [name for name, _ in frames] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    item = frames[7][1]["item"]
    assert item["type"] == "message"
    assert item["role"] == "assistant"
    assert item["content"] == [{"type": "output_text", "text": "Done codex", "annotations": []}]
    assert frames[4][1]["delta"] == "Done codex"


def test_models_list_for_each_api(make_server: Any) -> None:
    server = make_server([])

    openai = request(server, "GET", "/v1/models", headers=OPENAI_HEADERS)
    anthropic = request(server, "GET", "/v1/models", headers=ANTHROPIC_HEADERS)

    assert openai.json()["object"] == "list"
    assert anthropic.json()["data"][0]["type"] == "model"
    assert [r["kind"] for r in server.requests()] == ["models", "models"]


def test_unknown_path_is_a_recorded_404(make_server: Any) -> None:
    server = make_server([])

    answer = request(server, "POST", "/api/event_logging/batch", {"a": 1}, ANTHROPIC_HEADERS)

    assert answer.status == 404
    assert answer.json()["error"]["type"] == "not_found_error"
    (record,) = server.requests()
    assert (record["kind"], record["path"], record["body"]) == (
        "not_found",
        "/api/event_logging/batch",
        {"a": 1},
    )


# --- errors, delays, hangs ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "error_type"),
    [
        ("rate_limit", 429, "rate_limit_error"),
        ("overloaded", 529, "overloaded_error"),
        ("api_error", 500, "api_error"),
    ],
)
def test_anthropic_error_turns(make_server: Any, kind: str, status: int, error_type: str) -> None:
    server = make_server([{"turns": [{"error": kind, "retry_after_s": 1}, {"text": "recovered"}]}])

    answer = post_claude(server, claude_request("hi"))

    assert answer.status == status
    body = answer.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["error"]["message"]
    assert answer.headers["retry-after"] == "1"
    assert answer.headers["request-id"].startswith("req_")
    retry = post_claude(server, claude_request("hi")).events()  # the retry gets the next turn
    assert retry[2][1]["delta"]["text"] == "recovered"


@pytest.mark.parametrize(
    ("kind", "status", "error_type", "code"),
    [
        ("rate_limit", 429, "requests", "rate_limit_exceeded"),
        ("overloaded", 503, "server_error", None),
        ("api_error", 500, "server_error", None),
    ],
)
def test_openai_error_turns(
    make_server: Any, kind: str, status: int, error_type: str, code: str | None
) -> None:
    server = make_server([{"turns": [{"error": kind, "message": "scripted failure"}]}])

    answer = post_codex(server, codex_request("hi"))

    assert answer.status == status
    assert answer.json() == {
        "error": {"message": "scripted failure", "type": error_type, "param": None, "code": code}
    }


def test_error_status_can_be_overridden(make_server: Any) -> None:
    server = make_server([{"turns": [{"error": "overloaded", "status": 529}]}])

    assert post_codex(server, codex_request("hi")).status == 529


def test_delay_delays_the_answer(make_server: Any) -> None:
    server = make_server([{"turns": [{"text": "slow", "delay_ms": 300}, {"text": "fast"}]}])

    started = time.monotonic()
    post_claude(server, claude_request("hi"))
    slow = time.monotonic() - started
    started = time.monotonic()
    post_claude(server, claude_request("hi"))
    fast = time.monotonic() - started

    assert slow >= 0.3
    assert fast < 0.3


def test_a_turn_can_report_the_input_tokens_a_test_needs(make_server: Any) -> None:
    server = make_server([{"turns": [{"text": "costly", "input_tokens": 250000}, {"text": "x"}]}])

    costly = post_claude(server, claude_request("hi", stream=False)).json()
    plain = post_claude(server, claude_request("hi", stream=False)).json()

    assert costly["usage"]["input_tokens"] == 250000
    assert plain["usage"]["input_tokens"] < 1000


def test_hang_blocks_only_its_own_session_and_ends_on_stop(make_server: Any) -> None:
    server = make_server(
        [
            {"name": "stuck", "marker": "STUCK", "turns": [{"hang": True}]},
            {"name": "free", "marker": "FREE", "turns": [{"text": "still answering"}]},
        ]
    )
    outcome: dict[str, Any] = {}

    def hang() -> None:
        started = time.monotonic()
        try:
            outcome["answer"] = post_claude(server, claude_request("STUCK"))
        except (OSError, http.client.HTTPException) as exc:
            outcome["error"] = exc
        outcome["waited"] = time.monotonic() - started

    thread = threading.Thread(target=hang)
    thread.start()
    time.sleep(0.3)
    other = post_claude(server, claude_request("FREE"))
    assert other.events()[2][1]["delta"]["text"] == "still answering"
    assert thread.is_alive()

    stopped = time.monotonic()
    server.stop()
    thread.join(timeout=5)

    assert not thread.is_alive()
    assert time.monotonic() - stopped < 3
    assert "error" in outcome  # never answered: the connection just ended
    assert outcome["waited"] >= 0.3
    assert [(r["session"], r["kind"]) for r in server.requests()] == [
        ("stuck", "hang"),
        ("free", "text"),
    ]


def test_hang_ends_when_the_client_goes_away(make_server: Any) -> None:
    server = make_server([{"turns": [{"hang": True}, {"text": "next"}]}])
    before = set(handler_threads())  # other servers' threads, if any, are not ours

    with pytest.raises(TimeoutError):
        request(server, "POST", "/v1/messages", claude_request("hi"), ANTHROPIC_HEADERS, 0.3)

    deadline = time.monotonic() + 2
    while set(handler_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert set(handler_threads()) - before == set()  # the handler saw the client leave
    assert texts(post_claude(server, claude_request("hi"))) == "next"


def handler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "process_request_thread" in t.name]


# --- which session answers ----------------------------------------------------------------


def texts(answer: Answer) -> str:
    return "".join(
        data["delta"]["text"]
        for name, data in answer.events()
        if name == "content_block_delta" and data["delta"]["type"] == "text_delta"
    )


def test_marker_sessions_and_in_order_sessions(make_server: Any) -> None:
    server = make_server(
        [
            {"name": "first", "turns": [{"text": "first-0"}, {"text": "first-1"}]},
            {"name": "marked", "marker": "ISSUE-7", "turns": [{"text": "marked-0"}]},
            {"name": "second", "turns": [{"text": "second-0"}], "final_text": "second is done"},
        ],
        final_text="script is done",
    )
    assistant = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    more = {"role": "user", "content": [{"type": "text", "text": "go on"}]}

    assert texts(post_claude(server, claude_request("task A"))) == "first-0"
    assert texts(post_claude(server, claude_request("please fix ISSUE-7"))) == "marked-0"
    assert texts(post_claude(server, claude_request("task B"))) == "second-0"
    # a conversation continues its session: same opening user text, more messages
    assert texts(post_claude(server, claude_request("task A", [assistant, more]))) == "first-1"
    assert (
        texts(post_claude(server, claude_request("task B", [assistant, more]))) == "second is done"
    )
    # a marker is found wherever the opening text has it; a spent session answers its final text
    assert texts(post_claude(server, claude_request("again ISSUE-7", [assistant]))) == (
        "script is done"
    )
    # nothing left to claim: the script's final text, no session
    assert texts(post_claude(server, claude_request("task C"))) == "script is done"

    assert [(r["session"], r["turn"], r["kind"]) for r in server.requests()] == [
        ("first", 0, "text"),
        ("marked", 0, "text"),
        ("second", 0, "text"),
        ("first", 1, "text"),
        ("second", None, "final"),
        ("marked", None, "final"),
        (None, None, "final"),
    ]


def test_a_prompt_quoting_an_earlier_session_goes_to_the_marker_that_comes_last(
    make_server: Any,
) -> None:
    """A Repair's prompt opens with a preamble quoting the implement session's brief, marker
    and all; the Repair's own marker, later in the text, names its conversation."""
    server = make_server(
        [
            {
                "name": "implement",
                "marker": "ISSUE-7",
                "turns": [{"text": "i-0"}, {"text": "i-1"}],
                "final_text": "implement is done",
            },
            {"name": "repair", "marker": "CI is red", "turns": [{"text": "r-0"}]},
        ]
    )

    assert texts(post_claude(server, claude_request("fix ISSUE-7"))) == "i-0"
    # both unspent: the marker that ends furthest in
    assert texts(post_claude(server, claude_request("Before: fix ISSUE-7\n\nCI is red"))) == ("r-0")
    # the repair is spent: the session with turns left plays, wherever its marker is
    assert texts(post_claude(server, claude_request("Before: fix ISSUE-7\n\nCI is red"))) == ("i-1")
    # both spent: the marker that ends furthest in answers its final text
    assert texts(post_claude(server, claude_request("CI is red; it was ISSUE-7"))) == (
        "implement is done"
    )
    assert [r["session"] for r in server.requests()] == [
        "implement",
        "repair",
        "implement",
        "implement",
    ]


def test_a_conversation_that_made_a_tool_call_stays_in_its_session_once_spent(
    make_server: Any,
) -> None:
    """A Repair quoting the implement session's brief makes a tool call and spends its turns;
    its follow-up request, carrying that call back, stays with the Repair, not with the quoted
    implement session that still has turns left."""
    server = make_server(
        [
            {"name": "implement", "marker": "ISSUE-7", "turns": [{"text": "i-0"}, {"text": "i-1"}]},
            {
                "name": "repair",
                "marker": "CI is red",
                "turns": [{"tool_calls": [BASH]}],
                "final_text": "repair is done",
            },
        ]
    )
    prompt = "Before: fix ISSUE-7\n\nCI is red"
    first = post_claude(server, claude_request(prompt, stream=False)).json()
    tool_use = first["content"][0]
    history = [
        {"role": "assistant", "content": [tool_use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "ok"}],
        },
    ]

    assert texts(post_claude(server, claude_request(prompt, history))) == "repair is done"
    assert [r["session"] for r in server.requests()] == ["repair", "repair"]


def test_marker_in_a_tool_result_does_not_match(make_server: Any) -> None:
    server = make_server(
        [
            {"name": "plain", "turns": [{"tool_calls": [BASH]}, {"text": "plain-1"}]},
            {"name": "marked", "marker": "SECRET-MARKER", "turns": [{"text": "wrong"}]},
        ]
    )
    first = post_claude(server, claude_request("do it", stream=False)).json()
    tool_use = first["content"][0]
    history = [
        {"role": "assistant", "content": [tool_use]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "SECRET-MARKER"}
            ],
        },
    ]

    assert texts(post_claude(server, claude_request("do it", history))) == "plain-1"


def test_codex_conversation_continues_by_its_call_ids(make_server: Any) -> None:
    server = make_server(
        [
            {
                "name": "codex",
                "turns": [
                    {"tool_calls": [{"name": "exec_command", "input": {"cmd": "ls"}}]},
                    {"text": "listed"},
                ],
            },
            {"name": "other", "turns": [{"text": "other"}]},
        ]
    )
    frames = post_codex(server, codex_request("list files")).events()
    call = next(d["item"] for n, d in frames if n == "response.output_item.done")
    history = [
        {k: call[k] for k in ("type", "name", "arguments", "call_id")},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt"},
    ]
    # codex rewrote the opening text (say, a fresh environment block): the call id still tells
    follow_up = post_codex(server, codex_request("list files, reworded", history))

    item = next(d["item"] for n, d in follow_up.events() if n == "response.output_item.done")
    assert item["content"][0]["text"] == "listed"
    assert [r["session"] for r in server.requests()] == ["codex", "codex"]


# --- the request log ----------------------------------------------------------------------


def test_every_request_is_one_json_line(tmp_path: Path) -> None:
    script = ModelScript.from_dict({"sessions": [{"name": "s", "turns": [{"tool_calls": [BASH]}]}]})
    log = tmp_path / "logs" / "requests.jsonl"
    with ScriptedModelServer(script, log) as server:
        body = claude_request("hi")
        post_claude(server, body)
        request(server, "POST", "/v1/messages/count_tokens", body, ANTHROPIC_HEADERS)
        post_codex(server, codex_request("hi"))
        recorded = server.requests()

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == recorded
    assert len(lines) == 3
    first = lines[0]
    assert set(first) == {
        "ts",
        "method",
        "path",
        "api",
        "session",
        "turn",
        "kind",
        "body",
        "key",
    }
    assert (first["method"], first["path"], first["api"]) == (
        "POST",
        "/v1/messages?beta=true",
        "anthropic",
    )
    assert (first["session"], first["turn"], first["kind"]) == ("s", 0, "tool_calls")
    assert first["body"] == body
    assert first["ts"].endswith("+00:00")
    assert (lines[2]["api"], lines[2]["session"], lines[2]["kind"]) == ("openai", "s", "final")


# --- lifecycle and environment --------------------------------------------------------------


def test_url_needs_a_started_server(tmp_path: Path) -> None:
    server = ScriptedModelServer(ModelScript.from_dict({"sessions": []}), tmp_path / "r.jsonl")
    with pytest.raises(SandboxError, match="not started"):
        _ = server.url
    with server:
        assert server.url.startswith("http://127.0.0.1:")
    server.stop()  # stopping twice is harmless


def test_a_port_in_use_is_a_sandbox_error(tmp_path: Path) -> None:
    script = ModelScript.from_dict({"sessions": []})
    with ScriptedModelServer(script, tmp_path / "a.jsonl") as first:
        port = int(first.url.rsplit(":", 1)[1])
        second = ScriptedModelServer(script, tmp_path / "b.jsonl", port=port)
        with pytest.raises(SandboxError, match=f"cannot start on 127.0.0.1:{port}"):
            second.start()


def test_cli_environment_pieces(tmp_path: Path) -> None:
    env = claude_env("http://127.0.0.1:9", tmp_path)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["HOME"] == str(tmp_path)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    args = codex_config_args("http://127.0.0.1:9")
    assert 'model_providers.thirdshift-sandbox.base_url="http://127.0.0.1:9/v1"' in args
    key_var = next(a for a in args if ".env_key=" in a).split("=", 1)[1].strip('"')
    cenv = codex_env(tmp_path / ".codex")
    assert cenv["CODEX_HOME"] == str(tmp_path / ".codex")
    assert cenv[key_var]


# --- bad scripts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "top level must be an object"),
        ('{"sessions": {}}', "'sessions' must be a list"),
        ('{"sessions": [{"turns": [{}]}]}', r"sessions\[0\].turns\[0\] must have exactly one of"),
        (
            '{"sessions": [{"turns": [{"text": "a", "hang": true}]}]}',
            r"sessions\[0\].turns\[0\] must have exactly one of .* \(has text, hang\)",
        ),
        ('{"sessions": [{"turns": [{"error": "teapot"}]}]}', "error must be one of rate_limit"),
        ('{"sessions": [{"turns": [{"text": "a", "delay_ms": -1}]}]}', "delay_ms must be"),
        ('{"sessions": [{"turns": [{"tool_calls": []}]}]}', "tool_calls must be a non-empty list"),
        (
            '{"sessions": [{"turns": [{"tool_calls": [{"name": "Bash", "input": 3}]}]}]}',
            r"tool_calls\[0\].input must be an object",
        ),
        (
            '{"sessions": [{"turns": [], "colour": "red"}]}',
            r"sessions\[0\] has unknown key\(s\) colour",
        ),
        ('{"sessions": [{"name": "a", "turns": []}, {"name": "a", "turns": []}]}', "used twice"),
        ('{"sessions": [{"marker": "", "turns": []}]}', "marker must not be empty"),
        (
            '{"sessions": [{"turns": [{"hang": true, "input_tokens": 5}]}]}',
            "input_tokens belongs only to a text or tool_calls turn",
        ),
        (
            '{"sessions": [{"turns": [{"text": "a", "input_tokens": -1}]}]}',
            "input_tokens must be a non-negative integer",
        ),
        ('{"sessions": [{"turns": [{"text": "a", "status": 500}]}]}', "belongs only to an error"),
    ],
)
def test_bad_script_names_file_and_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(text)

    with pytest.raises(SandboxError, match=problem) as caught:
        ModelScript.load(path)

    assert str(path) in str(caught.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"missing\.json: cannot be read"):
        ModelScript.load(tmp_path / "missing.json")


def test_toml_script(tmp_path: Path) -> None:
    path = tmp_path / "script.toml"
    path.write_text(
        'final_text = "bye"\n'
        "[[sessions]]\n"
        'name = "edit"\n'
        'marker = "ISSUE-1"\n'
        "[[sessions.turns]]\n"
        'tool_calls = [{ name = "apply_patch", input = """\n'
        '*** Begin Patch\n*** End Patch\n""" }]\n'
        "[[sessions.turns]]\n"
        'error = "rate_limit"\n'
        "retry_after_s = 0\n"
    )

    script = ModelScript.load(path)

    (session,) = script.sessions
    assert (session.name, session.marker, session.final_text) == ("edit", "ISSUE-1", "bye")
    assert session.turns[0].tool_calls[0].input == "*** Begin Patch\n*** End Patch\n"
    assert (session.turns[1].error, session.turns[1].retry_after_s) == ("rate_limit", 0.0)


def test_from_dict_reports_without_a_file() -> None:
    with pytest.raises(SandboxError, match=r"^model script: sessions\[0\].turns must be a list"):
        ModelScript.from_dict({"sessions": [{"turns": None}]})
