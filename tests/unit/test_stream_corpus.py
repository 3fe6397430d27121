"""Both stream readers on malformed input: never an exception, always a sensible outcome.
Also the shared condensing helpers, and scrubbing before they cut."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from thirdshift.harnesses import Harness, Observation, StreamOutcome, StreamReader
from thirdshift.harnesses.claude import ClaudeHarness
from thirdshift.harnesses.codex import CodexHarness
from thirdshift.harnesses.opencode import OpenCodeHarness
from thirdshift.harnesses.qwen import QwenHarness
from thirdshift.harnesses.stream import (
    MAX_PARSED_LINE,
    SCRUB_MARGIN,
    cut,
    decode,
    first_line,
    git_action,
    one_line,
    unwrap_shell,
)
from thirdshift.scrub import Scrubber

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
GOOD = {
    "claude": FIXTURES / "claude-2.1.328-tool-session.jsonl",
    "codex": FIXTURES / "codex-0.169.0-tool-session.jsonl",
    "opencode": FIXTURES / "opencode-1.18.33-captured-tools.jsonl",
    "qwen": FIXTURES / "qwen-0.24.4-captured-tools.jsonl",
}
HARNESSES: dict[str, Callable[[], Harness]] = {
    "claude": ClaudeHarness,
    "codex": CodexHarness,
    "opencode": OpenCodeHarness,
    "qwen": QwenHarness,
}


def garbage(seed: int, count: int = 50) -> list[bytes]:
    """Random byte lines, invalid UTF-8 and NUL bytes included."""
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(1, 400)) for _ in range(count)] + [
        b"\xff\xfe\x00{\x80",
        b'{"type": "result", "result": "\xc3\x28"}',
    ]


def good_lines(harness: str) -> list[bytes]:
    return GOOD[harness].read_bytes().splitlines()


def truncated(harness: str) -> list[bytes]:
    """Every line of a good stream cut in half (a crash mid-write)."""
    return [line[: len(line) // 2] for line in good_lines(harness)]


def huge_line() -> list[bytes]:
    """A 10 MB line: valid JSON that the reader must not parse."""
    text = "x" * (10 * 1024 * 1024)
    return [json.dumps({"type": "result", "subtype": "success", "result": text}).encode()]


def unknown_types() -> list[bytes]:
    return [
        json.dumps(event).encode()
        for event in (
            {"type": "conversation_reset"},
            {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},
            {"type": "system", "subtype": "hook_response", "output": "x"},
            {"type": "item.updated", "item": {"id": "i9", "type": "todo_list", "items": []}},
            {"type": "item.plan.delta"},
            {"type": 7},
            {"no_type": True},
            {"type": "assistant", "message": {"content": "not a list"}},
            {"type": "assistant", "message": {"content": [1, None, {"type": "tool_use"}]}},
            {"type": "user", "message": None},
            {"type": "item.completed", "item": "not an object"},
            {"type": "item.started", "item": {"type": "command_execution", "command": 5}},
            {"type": "system", "subtype": "task_updated", "task_id": 3, "patch": []},
            {"type": "thread.started", "thread_id": None},
            {"type": "system", "subtype": "init", "session_id": ["x"]},
        )
    ] + [b"[1, 2, 3]", b'"a string"', b"null", b"{" * 100_000 + b"}" * 100_000]


def interleaved(harness: str) -> list[bytes]:
    """A good stream with garbage, blanks and unknown events between its lines."""
    noise = [*garbage(7, 5), b"", b"   ", b"not json at all", *unknown_types()]
    lines: list[bytes] = []
    for i, line in enumerate(good_lines(harness)):
        lines.append(noise[i % len(noise)])
        lines.append(line)
    return [*lines, noise[-1]]


CORPUS: dict[str, Callable[[str], list[bytes]]] = {
    "empty stream": lambda h: [],
    "blank lines only": lambda h: [b"", b"  ", b"\t", b"\r"],
    "binary garbage": lambda h: garbage(1),
    "truncated json": truncated,
    "a 10 MB line": lambda h: huge_line(),
    "unknown event types": lambda h: unknown_types(),
    "stops without a result": lambda h: good_lines(h)[:-1],
    "garbage interleaved": interleaved,
}


def run(harness: str, lines: list[bytes], exit_status: int | None = 0) -> StreamOutcome:
    reader = HARNESSES[harness]().reader()
    for line in lines:
        seen = reader.feed(line)
        assert all(len(event.summary) <= 200 for event in seen.events)
    return reader.finish(exit_status, stopped_after_result=False)


@pytest.mark.parametrize("harness", list(HARNESSES))
@pytest.mark.parametrize("case", [c for c in CORPUS if c != "garbage interleaved"])
def test_malformed_stream_never_raises_and_fails_without_a_result(harness: str, case: str) -> None:
    """Malformed input is skipped; a stream without a readable result is a failed session."""
    outcome = run(harness, CORPUS[case](harness))
    assert outcome.failed
    assert not outcome.result_seen
    assert outcome.failure_cause == f"{harness}'s stream ended without a result"
    assert outcome.killed_work == ()


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_malformed_stream_with_a_nonzero_exit_names_the_exit(harness: str) -> None:
    """The same garbage with exit 1: the cause is the exit status."""
    outcome = run(harness, garbage(3), exit_status=1)
    assert outcome.failure_cause == f"{harness} exited 1"


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_valid_stream_with_garbage_interleaved_reads_like_the_clean_one(harness: str) -> None:
    """Garbage between the lines changes nothing: same id, final message, usage."""
    clean = run(harness, good_lines(harness))
    noisy = run(harness, CORPUS["garbage interleaved"](harness))
    assert noisy == clean
    assert not noisy.failed
    assert noisy.session_id


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_session_id_survives_a_truncated_stream(harness: str) -> None:
    """A stream cut after its first lines still knows its session id."""
    outcome = run(harness, good_lines(harness)[:2], exit_status=None)
    assert outcome.session_id
    assert outcome.failed


def test_decode_skips_lines_over_the_cap_without_parsing_them() -> None:
    """A line one byte over the cap is None; at the cap it parses."""
    body = b'{"a":"' + b"x" * (MAX_PARSED_LINE - 8) + b'"}'
    assert len(body) == MAX_PARSED_LINE
    assert decode(body) is not None
    assert decode(body + b" ") is None


def test_decode_returns_only_objects() -> None:
    """Arrays, strings, invalid UTF-8 and deep nesting are None, never an exception."""
    assert decode(b'{"type":"x"}') == {"type": "x"}
    assert decode(b'  {"type":"x"}\r') == {"type": "x"}
    for line in (b"[1]", b'"s"', b"{\xff}", b"{" * 50_000, b"", b"{"):
        assert decode(line) is None


@pytest.mark.parametrize(
    ("command", "action"),
    [
        ("git commit -m 'x'", "commit"),
        ("git add -A && git commit -qm x", "commit"),
        ("git push origin HEAD", "push"),
        ("git commit -am x && git push", "commit and push"),
        ("cd repo; git -C sub -c user.name=a commit -m x", "commit"),
        ("GIT_EDITOR=true git commit --amend", "commit"),
        ("/usr/bin/git push", "push"),
        ("git log --grep push", None),
        ("echo git commit", None),
        ("git status", None),
        ("gitk", None),
        ("git commit -m 'unterminated", "commit"),
    ],
)
def test_git_commit_and_push_are_recognised(command: str, action: str | None) -> None:
    """Commits and pushes are recognised by subcommand, not by words in the line."""
    assert git_action(command) == action


@pytest.mark.parametrize(
    ("wrapped", "bare"),
    [
        ("/bin/bash -lc 'sleep 600'", "sleep 600"),
        ("/bin/bash -lc \"git commit -m 'x'\"", "git commit -m 'x'"),
        ("bash -lc ls", "ls"),
        ("sh -c 'a && b'", "a && b"),
        ("ls -la", "ls -la"),
        ("/bin/bash -lc 'echo '\\''hi'\\'''", "echo 'hi'"),
        ("bash -lc 'a' 'b'", "bash -lc 'a' 'b'"),
        ("/bin/bash -lc 'unterminated", "/bin/bash -lc 'unterminated"),
    ],
)
def test_shell_wrapper_is_peeled_off(wrapped: str, bare: str) -> None:
    """Codex's /bin/bash -lc '...' wrapper is removed for display."""
    assert unwrap_shell(wrapped) == bare


def test_cut_and_one_line_bound_their_output() -> None:
    """cut keeps short text and ends long text in … at the limit; one_line keeps one line."""
    assert cut("short") == "short"
    assert cut("x" * 101) == "x" * 99 + "…"
    assert len(cut("x" * 101)) == 100
    assert one_line("\n\n  first  \nsecond") == "first…"
    assert one_line("y" * 500) == "y" * 199 + "…"
    assert one_line("") == ""


def naive_head(text: str) -> tuple[str, bool]:
    lines = [line.strip() for line in text.splitlines()]
    filled = [line for line in lines if line]
    return (filled[0], len(filled) > 1) if filled else ("", False)


@pytest.mark.parametrize("seed", range(40))
def test_first_line_of_large_texts_matches_reading_them_whole(seed: int) -> None:
    """The windowed first-line search agrees with splitting the whole text, across windows."""
    rng = random.Random(seed)
    pieces = ["\n", " ", "\r\n", "x", "word ", "\n\n\n", "y" * rng.randint(1, 9000)]
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
    line, more = naive_head(text)
    assert first_line(text) == line
    assert one_line(text, 10**6) == (line + "…" if more else line)


# --- scrub first, then cut -----------------------------------------------------------------------

SECRET = "opaque-db-password-7f3k9q2x"


def test_cut_and_one_line_scrub_before_they_cut() -> None:
    """With a scrubber, a secret across the cut is replaced whole, then the text is cut."""
    scrub = Scrubber([SECRET])
    shown = cut("x" * 95 + SECRET, scrub=scrub)
    assert shown == "x" * 95 + "[RED…"
    assert one_line("y" * 195 + SECRET + "\nmore", scrub=scrub) == "y" * 195 + "[RED…"
    assert one_line(SECRET + "\nmore", scrub=scrub) == "[REDACTED]…"
    assert cut("short", scrub=scrub) == "short"


def test_a_long_text_is_scrubbed_only_near_its_head() -> None:
    """A huge line costs the scrubber the cut and a margin, not the whole line; it still ends in
    an ellipsis however much the scrubber shortened the head."""
    given: list[int] = []

    def scrub(text: str) -> str:
        given.append(len(text))
        return text[:10]

    assert cut("z" * 1_000_000, scrub=scrub) == "z" * 10 + "…"
    assert given == [100 + SCRUB_MARGIN]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*.jsonl")), ids=lambda path: path.stem)
def test_a_scrubber_changes_nothing_in_the_recorded_transcripts(fixture: Path) -> None:
    """Real streams hold no secrets: read with a scrubber, every progress line, event and
    outcome is what the plain reader gives."""
    harness = HARNESSES[fixture.name.split("-", 1)[0]]()
    lines = fixture.read_bytes().splitlines()

    def read(reader: StreamReader) -> tuple[list[Observation], StreamOutcome]:
        seen = [reader.feed(line) for line in lines]
        return seen, reader.finish(0, stopped_after_result=False)

    assert read(harness.reader(scrub=Scrubber())) == read(harness.reader())
