"""Context preambles: bounded text that opens a fresh session with what came before, rebuilt
from our database (ADR 0001, ADR 0013), never from a Harness transcript.

Two preambles, each with a token budget of its own, apart from the prompt it is added to (which
has its own bound, so a 30 KB issue can never crowd the steps out):

- the **resume brief** stands in for a native Resume that is no longer possible: the session's
  prompt, then what the session did (its newest steps), then what to do now;
- the **follow-up preamble** opens a Repair or a Continuation with what the sessions before it
  did: the nearest one inline (its brief, steps and outcome), up to four older ones as one-line
  pointers naming their Run and session.

Tokens are counted conservatively (one per three bytes of UTF-8). Every cut falls on a line
boundary and never inside an open code fence; a marker says what was left out, and the count
of left-out steps is exact (it counts the steps the database did not even hand over). A prompt
that opens with a slash command (``/skill args``) keeps it as its first line.
"""

from __future__ import annotations

from collections.abc import Sequence

from thirdshift.records import SessionHistory

RESUME_CAP_TOKENS = 4000
FOLLOW_UP_CAP_TOKENS = 2000
PROMPT_CAP_TOKENS = 12000
"""The prompt a resume brief restates: bounded on its own, apart from the preamble's budget."""
EVENTS_IN_RESUME = 50
"""How many of a session's newest steps the database hands over for a preamble."""
ANCESTORS = 5
MIN_CAP_TOKENS = 200
"""Below this a preamble cannot hold its own headings; settings refuse smaller caps."""

_FENCES = ("```", "~~~")


BYTES_PER_TOKEN = 3
"""A conservative estimate: real tokenizers average well over three bytes a token."""


def count_tokens(text: str) -> int:
    """The tokens ``text`` takes, at ``BYTES_PER_TOKEN``."""
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def cut_lines(text: str, cap_tokens: int, what: str) -> str:
    """``text`` whole if it fits ``cap_tokens``; otherwise its first lines and a marker line
    naming how many lines of ``what`` were left out, all within the cap. The cut falls on a
    line boundary outside any code fence (a fence left open would swallow what follows it)."""
    if count_tokens(text) <= cap_tokens:
        return text
    lines = _lines(text)
    budget = cap_tokens * BYTES_PER_TOKEN
    used = 0
    open_fence = False
    best = 0  # the longest prefix that ends outside a fence and fits with its marker
    for index, line in enumerate(lines):
        used += len(line.encode())
        if line.lstrip().startswith(_FENCES):
            open_fence = not open_fence
        marker = _left_out(len(lines) - index - 1, what)
        if used + len(marker.encode()) + 1 > budget:
            break
        if not open_fence:
            best = index + 1
    kept = "".join(lines[:best])
    if kept and not kept.endswith("\n"):
        kept += "\n"
    return kept + _left_out(len(lines) - best, what)


def _lines(text: str) -> list[str]:
    """``text``'s lines, each with its newline: only ``\n`` ends a line here, so a kept prefix
    is always the text's own beginning."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _left_out(count: int, what: str) -> str:
    return f"[{count} more line(s) of {what} left out]\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _steps_block(steps: Sequence[str], total: int, budget_bytes: int, heading: str) -> str:
    """The newest of ``steps`` (oldest first) that fit ``budget_bytes``, under ``heading``,
    with an exact count of the ones left out (``total`` counts those never handed over)."""
    lines = [f"- {_one_line(step)}\n" for step in steps]
    total = max(total, len(lines))
    if not total:
        return ""
    kept: list[str] = []
    size = len(heading.encode())
    for line in reversed(lines):
        marker = _steps_marker(total - len(kept) - 1)
        if size + len(line.encode()) + len(marker.encode()) > budget_bytes:
            break
        kept.insert(0, line)
        size += len(line.encode())
    return heading + _steps_marker(total - len(kept)) + "".join(kept)


def _steps_marker(cut: int) -> str:
    return f"[{cut} earlier step(s) left out]\n" if cut > 0 else ""


def _split_slash_command(prompt: str) -> tuple[str, str]:
    """A prompt that opens with a slash command (``/skill ...``) keeps it as its first line."""
    first, newline, rest = prompt.partition("\n")
    if first.startswith("/"):
        return first + newline, rest
    return "", prompt


def before_prompt(preamble: str, prompt: str) -> str:
    """``preamble`` opening ``prompt``: after its first line when that is a slash command
    (``/skill args``), which the CLI reads as a command only on line one."""
    if not preamble:
        return prompt
    command, rest = _split_slash_command(prompt)
    if command and not command.endswith("\n"):
        command += "\n"
    return f"{command}{preamble}{rest}"


def resume_brief(
    original_prompt: str,
    event_summaries: Sequence[str],
    instruction: str,
    *,
    total_events: int = 0,
    cap_tokens: int = RESUME_CAP_TOKENS,
    prompt_cap_tokens: int = PROMPT_CAP_TOKENS,
) -> str:
    """The prompt of a fresh session that stands in for a Resume: the original prompt (within
    ``prompt_cap_tokens``), then the resume preamble within ``cap_tokens``: what the earlier
    session did (its newest steps; ``total_events`` counts all it had, for the marker) and
    ``instruction`` (what to do now, kept whole up to half the cap)."""
    command, prompt = _split_slash_command(original_prompt)
    prompt = cut_lines(prompt.rstrip(), prompt_cap_tokens, "the prompt").rstrip()
    return f"{command}{prompt}\n\n---\n" + resume_preamble(
        event_summaries, instruction, total_events=total_events, cap_tokens=cap_tokens
    )


def resume_preamble(
    event_summaries: Sequence[str],
    instruction: str,
    *,
    total_events: int = 0,
    cap_tokens: int = RESUME_CAP_TOKENS,
) -> str:
    """The part of a resume brief after the prompt, within ``cap_tokens``."""
    head = "This session continues an earlier one whose conversation is gone.\n"
    tail = "\n" + cut_lines(instruction.strip(), cap_tokens // 2, "the instruction").rstrip()
    tail += "\n"
    budget = cap_tokens * BYTES_PER_TOKEN - len(head.encode()) - len(tail.encode())
    # Counted before the cut to the newest 50: the steps that cut drops are left out too.
    total = max(total_events, len(event_summaries))
    steps = _steps_block(
        list(event_summaries[-EVENTS_IN_RESUME:]),
        total,
        budget,
        "What it did, oldest first:\n",
    )
    return head + steps + tail


def follow_up_preamble(
    earlier: Sequence[SessionHistory], *, cap_tokens: int = FOLLOW_UP_CAP_TOKENS
) -> str:
    """What the sessions before this one did, oldest first in ``earlier``, within
    ``cap_tokens``: the nearest inline (where it sits, its brief, its newest steps, how it
    ended: head and tail of its final message, its Run's outcome, pull request and head), up to
    four before it as one-line pointers.

    The nearest is budgeted first: its brief, message and outcome are bounded from the start,
    and its steps may take all the rest but the pointers' share (a quarter at most), and that
    too when not even its newest step would fit otherwise. The pointers get what is left,
    the newest first; the oldest are the ones left out."""
    if not earlier:
        return ""
    *older, nearest = list(earlier[-ANCESTORS:])
    budget = cap_tokens * BYTES_PER_TOKEN
    pointers = [_pointer(session, budget // 16) for session in older]
    heading = "Earlier sessions (oldest first):\n"
    where = f"Run {nearest.run_id}, session {nearest.kind}" if nearest.run_id else nearest.kind
    brief = ""
    if nearest.prompt.strip():
        brief = (
            "Its brief:\n"
            + cut_lines(nearest.prompt.strip(), cap_tokens // 5, "its brief").rstrip()
            + "\n"
        )
    top = f"The session just before this one ({where}):\n{brief}"
    rest = _ending(nearest, cap_tokens // 5) + _outcome(nearest, budget // 10) + "\n"

    def inline(steps_budget: int) -> tuple[str, bool]:
        """The nearest's part, and whether its newest step is in it."""
        steps = _steps_block(
            nearest.steps,
            nearest.step_count,
            steps_budget - len(top.encode()) - len(rest.encode()),
            "Its steps, oldest first:\n",
        )
        # Listed oldest first: the newest is kept when the block ends with it.
        newest = bool(nearest.steps) and steps.endswith(f"- {_one_line(nearest.steps[-1])}\n")
        return top + steps + rest, newest

    share = min(len((heading + "".join(pointers)).encode()), budget // 4) if pointers else 0
    text, newest = inline(budget - share)
    if share and nearest.steps and not newest:
        widest, newest = inline(budget)
        if newest:  # the newest step goes before any pointer
            text = widest
    kept = list(pointers)
    while kept and len((heading + "".join(kept) + text).encode()) > budget:
        kept.pop(0)
    return (heading + "".join(kept) if kept else "") + text


def _pointer(session: SessionHistory, max_bytes: int) -> str:
    """One line naming an older session and how it ended."""
    said = _one_line(session.final_message or "") or "no final message"
    place = f"Run {session.run_id}, session {session.kind}" if session.run_id else session.kind
    line = f"- {place}: {said}"
    if session.run_outcome:
        line += f" (the Run {_one_line(session.run_outcome)})"
    encoded = line.encode()
    if len(encoded) > max_bytes:
        line = encoded[: max(max_bytes - 4, 0)].decode(errors="ignore") + " ..."
    return line + "\n"


def _ending(session: SessionHistory, cap_tokens: int) -> str:
    """The head and tail of the session's final message, within ``cap_tokens``."""
    message = (session.final_message or "").strip()
    if not message:
        return "It left no final message.\n"
    if count_tokens(message) <= cap_tokens:
        return f"It ended with:\n{message}\n"
    lines = message.split("\n")
    half = cap_tokens * BYTES_PER_TOKEN // 2 - 30
    head = _fitting(lines, half)
    tail = _fitting(lines[head:][::-1], half)
    between = len(lines) - head - tail
    return (
        "It ended with:\n"
        + "".join(line + "\n" for line in lines[:head])
        + f"[{between} line(s) of its message left out]\n"
        + "".join(line + "\n" for line in lines[len(lines) - tail :])
    )


def _fitting(lines: Sequence[str], budget_bytes: int) -> int:
    """How many of ``lines``, from the first, fit ``budget_bytes`` and end outside a fence."""
    used = 0
    open_fence = False
    best = 0
    for index, line in enumerate(lines):
        used += len(line.encode()) + 1
        if used > budget_bytes:
            break
        if line.lstrip().startswith(_FENCES):
            open_fence = not open_fence
        if not open_fence:
            best = index + 1
    return best


def _outcome(session: SessionHistory, max_bytes: int) -> str:
    """The Run's outcome, pull request and head, when the session was its last."""
    parts: list[str] = []
    if session.run_outcome:
        parts.append(f"Its Run {_one_line(session.run_outcome)}")
    if session.pull_request:
        at = f" at {session.head[:7]}" if session.head else ""
        parts.append(f"pull request #{session.pull_request}{at}")
    elif session.head:
        parts.append(f"the Issue branch's head was {session.head[:7]}")
    if not parts:
        return ""
    line = "; ".join(parts) + "."
    encoded = line.encode()
    if len(encoded) > max_bytes:
        line = encoded[: max(max_bytes - 4, 0)].decode(errors="ignore") + " ..."
    return line + "\n"
