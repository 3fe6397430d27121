"""The resume brief: bounded, the prompt verbatim, oldest steps cut first."""

from __future__ import annotations

from thirdshift.sessions.preamble import count_tokens, follow_up_preamble, resume_brief


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


def test_the_follow_up_preamble_shows_the_parent_and_points_at_older_sessions() -> None:
    """The parent's steps are listed; older sessions get one line each."""
    text = follow_up_preamble(
        [
            ("implement", "Implemented the feature.", ["$ make"]),
            ("repair-1", "Fixed the lint error.", ["Edit a.py", "$ make lint"]),
        ]
    )
    assert "- implement: Implemented the feature." in text
    assert "Steps of repair-1" in text
    assert text.index("Edit a.py") < text.index("$ make lint")
    assert "The last session (repair-1) ended with:\nFixed the lint error." in text


def test_the_follow_up_preamble_stays_under_its_cap() -> None:
    """Older pointers, then the oldest steps, give way first."""
    earlier = [
        (f"repair-{i}", "x" * 300, [f"$ step {j} " + "y" * 80 for j in range(60)]) for i in range(7)
    ]
    text = follow_up_preamble(earlier, cap_tokens=500)
    assert count_tokens(text) <= 500
    assert "$ step 59" in text


def test_no_earlier_sessions_means_no_preamble() -> None:
    """The opening session starts clean."""
    assert follow_up_preamble([]) == ""


def test_a_huge_final_message_is_cut_so_the_preamble_keeps_its_cap() -> None:
    """Even with nothing else to drop, the preamble never passes its cap."""
    message = "\n".join(f"line {i} " + "z" * 100 for i in range(400))
    text = follow_up_preamble([("implement", message, ["$ make"])], cap_tokens=300)
    assert count_tokens(text) <= 300
    assert "line 0 " in text


def test_left_out_steps_are_marked() -> None:
    """The reader is told how many of the parent's steps are missing."""
    steps = [f"$ step {i} " + "s" * 80 for i in range(50)]
    text = follow_up_preamble([("repair-1", "done", steps)], cap_tokens=400)
    assert "earlier step(s) left out]" in text
