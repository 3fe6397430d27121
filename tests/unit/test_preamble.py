"""The resume brief: bounded, the prompt verbatim, oldest steps cut first."""

from __future__ import annotations

from thirdshift.preamble import count_tokens, resume_brief


def test_the_prompt_is_kept_verbatim_and_the_steps_follow_in_order() -> None:
    """The original prompt opens the brief unchanged; the instruction closes it."""
    prompt = "Implement issue #7.\n\n  Keep   this spacing.\n"
    brief = resume_brief(prompt, ["$ npm install", "Edit a.py"], "Re-run npm test.")
    assert brief.startswith(prompt.rstrip())
    assert brief.index("$ npm install") < brief.index("Edit a.py") < brief.index("Re-run npm test.")


def test_the_oldest_steps_are_cut_first_to_fit_the_cap_with_a_marker() -> None:
    """Over the cap, the newest steps survive and a marker says how many were left out."""
    steps = [f"$ step number {i} " + "x" * 60 for i in range(50)]
    brief = resume_brief("Do it.", steps, "Finish.", cap_tokens=400)
    assert count_tokens(brief) <= 400
    assert "step number 49" in brief
    assert "step number 0 " not in brief
    assert "earlier step(s) left out]" in brief


def test_the_prompt_is_never_cut_even_over_the_cap() -> None:
    """A prompt larger than the cap stays whole; only the steps give way."""
    prompt = "Big brief. " * 500
    brief = resume_brief(prompt, ["$ a", "$ b"], "Finish.", cap_tokens=100)
    assert prompt.rstrip() in brief
    assert "$ a" not in brief


def test_a_leading_slash_command_stays_the_first_line() -> None:
    """A skill invocation keeps its place at the very top."""
    brief = resume_brief("/thirdshift-implement\nImplement #7.", ["$ make"], "Finish.")
    assert brief.splitlines()[0] == "/thirdshift-implement"
    assert brief.splitlines()[1] == "Implement #7."


def test_steps_are_one_line_each() -> None:
    """A multi-line summary is folded onto one line."""
    brief = resume_brief("Do it.", ["$ echo a\n  && echo b"], "Finish.")
    assert "- $ echo a && echo b\n" in brief
