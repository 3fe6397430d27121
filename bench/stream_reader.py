"""How fast the stream readers follow a large session, and how much memory they hold.

Run from the repository root: ``.venv/bin/python bench/stream_reader.py [--lines N]``.

For each Harness it generates a realistic transcript in memory (tool calls, tool results of
which some are large, messages, background tasks, unknown events and a little garbage), then
measures, on the same lines:

- the floor: splitting the bytes into lines and ``json.loads``-ing each one;
- the reader: ``feed`` on every line, then ``finish``.

It prints lines/s, MB/s and the peak memory each one allocates (tracemalloc), excluding the
transcript itself. Figures, not assertions: no test depends on them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from thirdshift.harnesses import Harness
from thirdshift.harnesses.claude import ClaudeHarness
from thirdshift.harnesses.codex import CodexHarness
from thirdshift.harnesses.opencode import OpenCodeHarness
from thirdshift.harnesses.qwen import QwenHarness

BIG_RESULT_EVERY = 500  # one tool result in this many carries a big output
BIG_RESULT_BYTES = 256 * 1024


def claude_transcript(lines: int, rng: random.Random) -> list[bytes]:
    sid = "25c03292-1c61-4edb-98c3-868642a6004e"
    out: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": sid, "tools": ["Bash", "Edit"] * 10}
    ]
    n = 0
    while len(out) < lines - 1:
        n += 1
        call = f"toolu_{n}"
        kind = rng.random()
        if kind < 0.4:
            tool = {"name": "Bash", "input": {"command": f"pytest -q tests/test_{n}.py -x"}}
        elif kind < 0.7:
            tool = {"name": "Edit", "input": {"file_path": f"/w/src/mod_{n}.py", "old_string": "a"}}
        else:
            tool = {"name": "Read", "input": {"file_path": f"/w/src/mod_{n}.py"}}
        out.append(_assistant(sid, {"type": "tool_use", "id": call, **tool}))
        size = BIG_RESULT_BYTES if n % BIG_RESULT_EVERY == 0 else rng.randint(20, 2000)
        text = _text(rng, size)
        out.append(
            {
                "type": "user",
                "session_id": sid,
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call, "content": text}],
                },
                "tool_use_result": {"stdout": text, "stderr": "", "interrupted": False},
            }
        )
        if n % 5 == 0:
            out.append(_assistant(sid, {"type": "text", "text": _text(rng, 300)}))
        if n % 50 == 0:
            out.append({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}})
        if n % 100 == 0:
            out.append(
                {
                    "type": "system",
                    "subtype": "task_started",
                    "task_id": f"b{n}",
                    "description": "t",
                }
            )
    out.append({"type": "result", "subtype": "success", "is_error": False, "result": "Done."})
    return _encode(out, rng)


def codex_transcript(lines: int, rng: random.Random) -> list[bytes]:
    out: list[dict[str, Any]] = [
        {"type": "thread.started", "thread_id": "01a228f1-67cb-7693-abe2-57d90b33f56b"},
        {"type": "turn.started"},
    ]
    n = 0
    while len(out) < lines - 1:
        n += 1
        command = f"/bin/bash -lc 'pytest -q tests/test_{n}.py'"
        item = {"id": f"item_{n}", "type": "command_execution", "command": command}
        out.append({"type": "item.started", "item": item | {"status": "in_progress"}})
        size = BIG_RESULT_BYTES if n % BIG_RESULT_EVERY == 0 else rng.randint(20, 2000)
        done = {"aggregated_output": _text(rng, size), "exit_code": 0, "status": "completed"}
        out.append({"type": "item.completed", "item": item | done})
        if n % 5 == 0:
            text = _text(rng, 300)
            message = {"id": f"msg_{n}", "type": "agent_message", "text": text}
            out.append({"type": "item.completed", "item": message})
    out.append({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    return _encode(out, rng)


def opencode_transcript(lines: int, rng: random.Random) -> list[bytes]:
    sid = "ses_dbc8b8687ffedTFfzoisHD10ut"
    out: list[dict[str, Any]] = []
    n = 0
    while len(out) < lines - 2:
        n += 1
        out.append({"type": "step_start", "sessionID": sid, "part": {"type": "step-start"}})
        size = BIG_RESULT_BYTES if n % BIG_RESULT_EVERY == 0 else rng.randint(20, 2000)
        state = {
            "status": "completed",
            "input": {"command": f"pytest -q tests/test_{n}.py", "description": "tests"},
            "output": _text(rng, size),
            "metadata": {"exit": 0},
        }
        tool = {"type": "tool", "tool": "bash", "callID": f"toolu_{n}", "state": state}
        out.append({"type": "tool_use", "sessionID": sid, "part": tool})
        if n % 5 == 0:
            text = {"type": "text", "text": _text(rng, 300)}
            out.append({"type": "text", "sessionID": sid, "part": text})
        out.append(_opencode_step(sid, "tool-calls"))
    out.append(_opencode_step(sid, "stop"))
    return _encode(out, rng)


def _opencode_step(sid: str, reason: str) -> dict[str, Any]:
    tokens = {"input": 900, "output": 40, "reasoning": 0, "cache": {"read": 9000, "write": 0}}
    part = {"type": "step-finish", "reason": reason, "tokens": tokens, "cost": 0.003}
    return {"type": "step_finish", "sessionID": sid, "part": part}


def qwen_transcript(lines: int, rng: random.Random) -> list[bytes]:
    """Qwen Code's stream: Claude Code's shapes with its own tools, a message id per line
    (each with its usage), goal-state stream events, and background shells."""
    sid = "03c67dc7-bcaf-4e0b-a887-9935877dd581"
    out: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": sid, "qwen_code_version": "0.24.4"}
    ]
    n = 0
    while len(out) < lines - 1:
        n += 1
        call = f"toolu_q_{n}"
        if rng.random() < 0.5:
            tool_input = {"command": f"pytest -q tests/test_{n}.py", "is_background": n % 100 == 0}
            tool = {"name": "run_shell_command", "input": tool_input}
        else:
            tool = {"name": "edit", "input": {"file_path": f"/w/src/mod_{n}.py", "old_string": "a"}}
        message = _assistant(sid, {"type": "tool_use", "id": call, **tool})
        message["message"]["id"] = f"m{n}"
        out.append(message)
        size = BIG_RESULT_BYTES if n % BIG_RESULT_EVERY == 0 else rng.randint(20, 2000)
        result = {"type": "tool_result", "tool_use_id": call, "content": _text(rng, size)}
        out.append({"type": "user", "session_id": sid, "message": {"content": [result]}})
        if n % 20 == 0:
            out.append({"type": "stream_event", "event": {"type": "goal_state"}})
    usage = {"input_tokens": 1, "output_tokens": 1}
    out.append({"type": "result", "subtype": "success", "result": "Done.", "usage": usage})
    return _encode(out, rng)


def _assistant(sid: str, block: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "session_id": sid,
        "message": {"role": "assistant", "content": [block], "usage": {"input_tokens": 10}},
    }


def _text(rng: random.Random, size: int) -> str:
    words = ["collected", "passed", "test_widgets.py", "::", "ok", "FAILED", "\n", "assert"]
    parts: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        parts.append(word)
        total += len(word) + 1
    return " ".join(parts)


def _encode(events: list[dict[str, Any]], rng: random.Random) -> list[bytes]:
    lines = [json.dumps(event, separators=(",", ":")).encode() for event in events]
    for i in range(0, len(lines), 1000):  # a little garbage, as a real log may hold
        lines.insert(i + 1, rng.randbytes(40).replace(b"\n", b" "))
    return lines


def floor(data: bytes) -> int:
    """Read line by line and parse what parses: the least any reader must do."""
    count = 0
    for line in io.BytesIO(data):
        with contextlib.suppress(ValueError):
            json.loads(line)
        count += 1
    return count


def reader_pass(harness: Harness) -> Callable[[bytes], int]:
    def run(data: bytes) -> int:
        reader = harness.reader()
        count = 0
        for line in io.BytesIO(data):
            reader.feed(line.rstrip(b"\n"))
            count += 1
        reader.finish(0, stopped_after_result=False)
        return count

    return run


def measure(label: str, work: Callable[[bytes], Any], data: bytes, lines: int) -> None:
    gc.collect()
    started = time.perf_counter()
    work(data)
    elapsed = time.perf_counter() - started
    gc.collect()
    tracemalloc.start()
    work(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mb = len(data) / 1e6
    print(
        f"  {label:<26} {elapsed:7.2f} s  {lines / elapsed:>10,.0f} lines/s"
        f"  {mb / elapsed:7.1f} MB/s  peak {peak / 1e6:7.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    rng = random.Random(20261129)  # noqa: S311 - a reproducible transcript, not a secret
    cases: list[tuple[str, Harness, Callable[[int, random.Random], list[bytes]]]] = [
        ("claude", ClaudeHarness(), claude_transcript),
        ("codex", CodexHarness(), codex_transcript),
        ("opencode", OpenCodeHarness(), opencode_transcript),
        ("qwen", QwenHarness(), qwen_transcript),
    ]
    for name, harness, make in cases:
        lines = make(args.lines, rng)
        data = b"\n".join(lines) + b"\n"
        print(f"{name}: {len(lines):,} lines, {len(data) / 1e6:.1f} MB")
        measure("floor (split + json.loads)", floor, data, len(lines))
        measure(f"{name} reader", reader_pass(harness), data, len(lines))


if __name__ == "__main__":
    main()
