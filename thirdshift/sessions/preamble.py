"""Context preambles: bounded text that opens a fresh session with what came before, rebuilt
from our database (ADR 0001), never from a Harness transcript.

This holds the resume brief the Sessions module needs when a native Resume is no longer
possible. Tokens are counted conservatively (one per three bytes of UTF-8), the brief's own
prompt is kept verbatim and never cut, and the oldest event lines are cut first, with a marker
saying how many were left out. A leading slash-command line stays first.
"""

from __future__ import annotations

from collections.abc import Sequence

from thirdshift.records import SessionHistory

RESUME_CAP_TOKENS = 4000
EVENTS_IN_RESUME = 50


def count_tokens(text: str) -> int:
    """A conservative token estimate: real tokenizers average well over three bytes a token."""
    return -(-len(text.encode()) // 3)


def resume_brief(
    original_prompt: str,
    event_summaries: Sequence[str],
    instruction: str,
    *,
    cap_tokens: int = RESUME_CAP_TOKENS,
) -> str:
    """The prompt of a fresh session that stands in for a Resume: the original prompt verbatim,
    what the earlier session did (its last event summaries, oldest cut first to fit the cap),
    then ``instruction`` (what to do now, e.g. re-run the killed work)."""
    command, prompt = _split_slash_command(original_prompt)
    head = (
        f"{prompt.rstrip()}\n\n---\n"
        "This session continues an earlier one whose conversation is gone.\n"
    )
    tail = f"\n{instruction.strip()}\n"
    summaries = [" ".join(line.split()) for line in event_summaries[-EVENTS_IN_RESUME:]]
    fixed = count_tokens(command + head + tail)
    kept = list(summaries)
    while (
        kept and fixed + count_tokens(_event_block(kept, len(summaries) - len(kept))) > cap_tokens
    ):
        kept.pop(0)
    body = _event_block(kept, len(summaries) - len(kept))
    return command + head + body + tail


def _event_block(lines: Sequence[str], cut: int) -> str:
    if not lines and not cut:
        return ""
    marker = f"[{cut} earlier step(s) left out]\n" if cut else ""
    listed = "".join(f"- {line}\n" for line in lines)
    return f"What it did, oldest first:\n{marker}{listed}"


def _split_slash_command(prompt: str) -> tuple[str, str]:
    """A prompt that opens with a slash command (``/skill ...``) keeps it as its first line."""
    first, newline, rest = prompt.partition("\n")
    if first.startswith("/"):
        return first + newline, rest
    return "", prompt


FOLLOW_UP_CAP_TOKENS = 2000
ANCESTORS = 5


def follow_up_preamble(
    earlier: Sequence[SessionHistory] | Sequence[tuple[str, str | None, Sequence[str]]],
    *,
    cap_tokens: int = FOLLOW_UP_CAP_TOKENS,
) -> str:
    """What the earlier sessions of this Run did, for the top of a Repair's prompt. ``earlier``
    is ``(kind, final message, event summaries)`` oldest first; the newest (the parent) is shown
    with its steps, up to four before it as one-line pointers. To fit the cap, older pointers go
    first, then the parent's oldest steps (a marker says how many), and last the parent's final
    message is cut at a line boundary."""
    if not earlier:
        return ""
    recent = list(earlier[-ANCESTORS:])
    *older, (parent_kind, parent_message, parent_steps) = recent
    pointers = [
        f"- {kind}: {' '.join((message or 'no final message').split())[:200]}"
        for kind, message, _ in older
    ]
    steps = [f"- {' '.join(step.split())}" for step in parent_steps[-EVENTS_IN_RESUME:]]
    total_steps = len(steps)
    closing_lines = (parent_message or "no final message").strip().splitlines() or [""]

    def render() -> str:
        cut = total_steps - len(steps)
        marker = f"[{cut} earlier step(s) left out]\n" if cut else ""
        return (
            "Earlier sessions of this Run:\n"
            + "".join(line + "\n" for line in pointers)
            + f"Steps of {parent_kind}, oldest first:\n"
            + marker
            + "".join(step + "\n" for step in steps)
            + f"The last session ({parent_kind}) ended with:\n"
            + "\n".join(closing_lines)
            + "\n\n"
        )

    text = render()
    while count_tokens(text) > cap_tokens:
        if pointers:
            pointers.pop(0)
        elif steps:
            steps.pop(0)
        elif len(closing_lines) > 1:
            closing_lines = [*closing_lines[:-2], "[the rest of its message is left out]"]
        else:
            budget = max(0, cap_tokens * 3 - len(render().encode()) + len(closing_lines[0]))
            closing_lines = [closing_lines[0][: budget // 2] + " [cut]"]
            return render()
        text = render()
    return text
