"""Context preambles: each within its own budget whatever the prompt's size, the newest steps kept
over the oldest, an exact count of what was left out, cuts on line boundaries outside code
fences, and a slash command kept first. Examples first, then properties over any input."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from thirdshift.records import SessionHistory
from thirdshift.runs.rules.prompts import ci_fix_prompt
from thirdshift.sessions.preamble import (
    before_prompt,
    count_tokens,
    cut_lines,
    follow_up_preamble,
    resume_brief,
    resume_preamble,
)

LEFT_OUT = re.compile(r"\[(\d+) earlier step\(s\) left out\]")


def session(
    kind: str = "implement",
    message: str | None = "done",
    steps: list[str] | None = None,
    *,
    run_id: int = 1,
    prompt: str = "",
    run_outcome: str | None = None,
    pull_request: int | None = None,
    head: str | None = None,
) -> SessionHistory:
    found = tuple(steps if steps is not None else ["$ make"])
    return SessionHistory(
        kind,
        message,
        found,
        run_id=run_id,
        prompt=prompt,
        step_count=len(found),
        run_outcome=run_outcome,
        pull_request=pull_request,
        head=head,
    )


def preamble_of(brief: str) -> str:
    return brief.split("\n---\n", 1)[1]


def test_the_prompt_opens_the_brief_and_the_steps_follow_in_order() -> None:
    prompt = "Implement issue #7.\n\n  Keep   this spacing.\n"
    brief = resume_brief(prompt, ["$ npm install", "Edit a.py"], "Re-run npm test.")
    assert brief.startswith(prompt.rstrip())
    assert brief.index("$ npm install") < brief.index("Edit a.py") < brief.index("Re-run npm test.")


def test_a_30_kb_issue_never_crowds_out_the_steps_and_the_preamble_keeps_its_cap() -> None:
    """The reported failure: a 30 KB issue body made a 10,549-token brief listing no step."""
    prompt = "\n".join(f"Requirement {i}: " + "detail " * 12 for i in range(400))
    assert len(prompt.encode()) > 30_000
    steps = [f"$ step {i}" for i in range(14)]
    brief = resume_brief(prompt, steps, "Finish.", total_events=14)
    assert count_tokens(preamble_of(brief)) <= 4000
    assert all(f"$ step {i}\n" in brief for i in range(14))
    assert "more line(s) of the prompt left out]" in brief
    assert "left out]" not in preamble_of(brief)


def test_the_left_out_count_counts_the_steps_the_database_never_handed_over() -> None:
    """64 events, the newest 50 handed over, all 50 fit: 14 left out, not 0."""
    steps = [f"$ step {i}" for i in range(14, 64)]
    text = resume_preamble(steps, "Finish.", total_events=64)
    assert "[14 earlier step(s) left out]" in text


def test_the_oldest_steps_are_cut_first_to_fit_with_an_exact_marker() -> None:
    steps = [f"$ step number {i} " + "x" * 60 for i in range(50)]
    text = resume_preamble(steps, "Finish.", total_events=50, cap_tokens=400)
    assert count_tokens(text) <= 400
    assert "step number 49 " in text
    assert "step number 0 " not in text
    kept = text.count("- $ step number")
    [cut] = LEFT_OUT.findall(text)
    assert int(cut) + kept == 50


def test_a_leading_slash_command_stays_the_first_line() -> None:
    brief = resume_brief("/thirdshift-implement\nImplement #7.", ["$ make"], "Finish.")
    assert brief.splitlines()[:2] == ["/thirdshift-implement", "Implement #7."]


def test_steps_are_one_line_each() -> None:
    brief = resume_brief("Do it.", ["$ echo a\n  && echo b"], "Finish.")
    assert "- $ echo a && echo b\n" in brief


def test_a_cut_never_falls_inside_an_open_code_fence() -> None:
    """A prompt cut inside a fence would leave it open and swallow the preamble after it."""
    text = "Intro.\n```python\n" + "".join(f"line_{i} = {i}\n" for i in range(400)) + "```\nEnd.\n"
    cut = cut_lines(text, 200, "the prompt")
    assert cut.count("```") % 2 == 0
    assert cut.startswith("Intro.\n")
    assert cut.endswith("more line(s) of the prompt left out]\n")


def test_the_follow_up_preamble_names_the_nearest_session_inline_and_points_at_older_ones() -> None:
    text = follow_up_preamble(
        [
            session(
                "implement",
                "Implemented the feature.",
                run_id=3,
                run_outcome="ended failed: CI stayed red",
                pull_request=12,
                head="abc1234def",
            ),
            session(
                "repair-1",
                "Fixed the lint error.",
                ["Edit a.py", "$ make lint"],
                run_id=4,
                prompt="Fix the lint failure in a.py.",
            ),
        ]
    )
    assert "- Run 3, session implement: Implemented the feature. (the Run ended failed: CI" in text
    assert "The session just before this one (Run 4, session repair-1):" in text
    assert "Its brief:\nFix the lint failure in a.py." in text
    assert text.index("Edit a.py") < text.index("$ make lint")
    assert "It ended with:\nFixed the lint error." in text


def test_the_nearest_earlier_run_s_outcome_pull_request_and_head_are_inline() -> None:
    text = follow_up_preamble(
        [
            session(
                run_id=7,
                run_outcome="ended failed: the Repair budget (5) is spent",
                pull_request=12,
                head="abc1234def",
            )
        ]
    )
    assert "Its Run ended failed: the Repair budget (5) is spent; pull request #12 at abc1234." in (
        text
    )


def test_a_huge_final_message_keeps_its_head_and_tail() -> None:
    message = "\n".join(f"line {i} " + "z" * 100 for i in range(400))
    text = follow_up_preamble([session(message=message)], cap_tokens=600)
    assert count_tokens(text) <= 600
    assert "line 0 " in text
    assert "line 399 " in text
    assert "line(s) of its message left out]" in text


def test_no_earlier_sessions_means_no_preamble() -> None:
    assert follow_up_preamble([]) == ""


# -- properties -------------------------------------------------------------------------------

line_text = st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=120)
fenced_text = st.lists(
    st.one_of(line_text, st.sampled_from(["```", "```python", "~~~", "    ```"])), max_size=80
).map("\n".join)
steps_lists = st.lists(line_text, max_size=60)
caps = st.integers(min_value=200, max_value=5000)


@settings(max_examples=150, deadline=None)
@given(
    prompt=fenced_text,
    steps=steps_lists,
    extra=st.integers(min_value=0, max_value=10_000),
    cap=caps,
    slash=st.booleans(),
)
def test_the_resume_preamble_keeps_its_cap_the_newest_steps_and_an_exact_count(
    prompt: str, steps: list[str], extra: int, cap: int, slash: bool
) -> None:
    original = ("/skill run it\n" if slash else "") + prompt
    total = len(steps) + extra
    brief = resume_brief(original, steps, "Finish the task.", total_events=total, cap_tokens=cap)
    preamble = preamble_of(brief)
    assert count_tokens(preamble) <= cap
    assert "Finish the task." in preamble  # the brief's own words are never cut
    if slash:
        assert brief.startswith("/skill run it\n")
    listed = [line for line in preamble.splitlines() if line.startswith("- ")]
    wanted = [f"- {' '.join(step.split())}" for step in steps[-50:]]
    assert listed == wanted[len(wanted) - len(listed) :]  # the newest survive, in order
    cut = LEFT_OUT.findall(preamble)
    assert (int(cut[0]) if cut else 0) + len(listed) == max(total, len(steps[-50:]))


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(st.text(alphabet="abc $-", max_size=20), min_size=51, max_size=200),
    cap=caps,
)
def test_without_a_total_the_left_out_count_still_counts_every_step_handed_in(
    steps: list[str], cap: int
) -> None:
    """Called with no total and more steps than a preamble takes: those beyond the newest 50
    are counted as left out too, never dropped without a word."""
    text = resume_preamble(steps, "Finish the task.", cap_tokens=cap)
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    cut = LEFT_OUT.findall(text)
    assert cut
    assert int(cut[0]) + len(listed) == len(steps)


@settings(max_examples=150, deadline=None)
@given(text=fenced_text, cap=st.integers(min_value=20, max_value=3000))
def test_a_cut_keeps_its_cap_falls_on_a_line_boundary_and_closes_every_fence(
    text: str, cap: int
) -> None:
    cut = cut_lines(text, cap, "the prompt")
    assert count_tokens(cut) <= cap
    if cut != text:
        kept, _, marker = cut.rpartition("[")
        assert text.startswith(kept)
        assert kept == "" or kept.endswith("\n")
        fences = [line for line in kept.splitlines() if line.lstrip().startswith(("```", "~~~"))]
        assert len(fences) % 2 == 0
        assert marker.endswith("line(s) of the prompt left out]\n")


histories = st.lists(
    st.builds(
        SessionHistory,
        kind=st.sampled_from(["implement", "repair-1", "repair-2", "implement-resume"]),
        final_message=st.one_of(st.none(), fenced_text),
        steps=st.lists(line_text, max_size=50).map(tuple),
        run_id=st.integers(min_value=1, max_value=10_000),
        prompt=fenced_text,
        step_count=st.integers(min_value=0, max_value=5000),
        run_outcome=st.one_of(st.none(), line_text.map(lambda t: f"ended failed: {t}")),
        pull_request=st.one_of(st.none(), st.integers(min_value=1, max_value=99999)),
        head=st.one_of(st.none(), st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(earlier=histories, cap=caps)
def test_the_follow_up_preamble_keeps_its_cap_and_names_its_nearest_session(
    earlier: list[SessionHistory], cap: int
) -> None:
    text = follow_up_preamble(earlier, cap_tokens=cap)
    assert count_tokens(text) <= cap
    nearest = earlier[-1]
    assert f"(Run {nearest.run_id}, session {nearest.kind}):" in text
    total = max(nearest.step_count, len(nearest.steps))
    if "Its steps, oldest first:\n" not in text:
        assert total == 0
        return
    block = text.split("Its steps, oldest first:\n", 1)[1]
    block = re.split(r"\nIt (?:ended with|left no final message)", "\n" + block, maxsplit=1)[0]
    steps = [line for line in block.splitlines() if line.startswith("- ")]
    cut = LEFT_OUT.findall(block)
    assert (int(cut[0]) if cut else 0) + len(steps) == total
    wanted = [f"- {' '.join(step.split())}" for step in nearest.steps]
    assert steps == wanted[len(wanted) - len(steps) :]  # the newest survive, in order


def steps_of(text: str) -> list[str]:
    """The step lines of a follow-up preamble's inline session."""
    if "Its steps, oldest first:\n" not in text:
        return []
    block = text.split("Its steps, oldest first:\n", 1)[1]
    block = re.split(r"\nIt (?:ended with|left no final message)", "\n" + block, maxsplit=1)[0]
    return [line for line in block.splitlines() if line.startswith("- ")]


def test_older_sessions_never_crowd_out_the_nearest_session_s_newest_step() -> None:
    """At the smallest cap, four older sessions and a nearest one whose brief and final message
    fill their fifths: pointers give way, the newest step of the session just before stays."""
    older = [session(message="x" * 2000, run_id=n) for n in range(1, 5)]
    nearest = session(
        "repair-1",
        "\n".join(f"message line {i}" for i in range(300)),
        ["$ make lint", "$ make test " + "y" * 80],
        run_id=5,
        prompt="\n".join(f"brief line {i}" for i in range(300)),
        run_outcome="ended failed: " + "z" * 400,
    )
    text = follow_up_preamble([*older, nearest], cap_tokens=200)
    assert count_tokens(text) <= 200
    assert steps_of(text)[-1:] == ["- $ make test " + "y" * 80]


# Histories where everything competes for a small cap: older sessions whose pointers fill their
# share, a nearest session whose brief and message fill their fifths and whose steps are long.
many_lines = st.lists(st.text(alphabet="abc xyz", max_size=40), min_size=20, max_size=200).map(
    "\n".join
)
crowded = st.builds(
    lambda older, nearest: [*older, nearest],
    st.lists(
        st.builds(
            SessionHistory,
            kind=st.just("implement"),
            final_message=st.just("a long final message " * 20),
            steps=st.just(()),
            run_id=st.integers(min_value=1, max_value=99),
        ),
        min_size=1,
        max_size=4,
    ),
    st.builds(
        SessionHistory,
        kind=st.just("repair-1"),
        final_message=many_lines,
        steps=st.lists(st.text(alphabet="abc $-", min_size=60, max_size=150), max_size=5).map(
            tuple
        ),
        run_id=st.just(100),
        prompt=many_lines,
        step_count=st.integers(min_value=0, max_value=500),
        run_outcome=st.one_of(st.none(), st.just("ended failed: " + "z" * 300)),
    ),
)


@settings(max_examples=300, deadline=None)
@given(earlier=st.one_of(crowded, histories), cap=st.integers(min_value=200, max_value=600))
def test_the_nearest_session_s_newest_step_survives_whenever_the_cap_allows_it(
    earlier: list[SessionHistory], cap: int
) -> None:
    """The cap allows it when the nearest session alone keeps its newest step: then the older
    sessions' pointers never push it out."""
    nearest = earlier[-1]
    if not nearest.steps or not steps_of(follow_up_preamble([nearest], cap_tokens=cap)):
        return
    text = follow_up_preamble(earlier, cap_tokens=cap)
    assert count_tokens(text) <= cap
    assert steps_of(text)[-1] == f"- {' '.join(nearest.steps[-1].split())}"


@settings(max_examples=150, deadline=None)
@given(earlier=histories, cap=caps)
def test_the_nearest_session_s_brief_is_whole_up_to_a_fifth_of_the_cap(
    earlier: list[SessionHistory], cap: int
) -> None:
    """The brief is kept whole when it fits a fifth of the cap, else its first lines within
    that fifth and a marker: never squeezed by the steps or the pointers."""
    nearest = earlier[-1]
    brief = nearest.prompt.strip()
    text = follow_up_preamble(earlier, cap_tokens=cap)
    after = text.split(f"(Run {nearest.run_id}, session {nearest.kind}):\n", 1)[1]
    if not brief:
        assert not after.startswith("Its brief:\n")
    elif count_tokens(brief) <= cap // 5:
        assert after.startswith(f"Its brief:\n{brief}\n")
    else:
        assert after.startswith(f"Its brief:\n{cut_lines(brief, cap // 5, 'its brief')}")


# Instructions of any size up to several caps (hypothesis alone keeps texts short), fences
# among their lines.
instructions = (
    st.integers(min_value=0, max_value=150)
    .flatmap(
        lambda count: st.lists(
            st.one_of(
                st.integers(min_value=0, max_value=100).map(lambda width: ("a word " * 15)[:width]),
                st.sampled_from(["```", "~~~"]),
                line_text,
            ),
            min_size=count,
            max_size=count,
        )
    )
    .map("\n".join)
)


@settings(max_examples=150, deadline=None)
@given(
    instruction=st.one_of(instructions, fenced_text),
    steps=steps_lists,
    cap=st.integers(min_value=200, max_value=2000),
)
def test_the_resume_preamble_s_instruction_is_whole_up_to_half_the_cap(
    instruction: str, steps: list[str], cap: int
) -> None:
    """What to do now is kept whole when it fits half the cap, else its first lines within
    that half and a marker; the steps fit around it, never into it."""
    text = resume_preamble(steps, instruction, cap_tokens=cap)
    assert count_tokens(text) <= cap
    wanted = instruction.strip()
    if count_tokens(wanted) > cap // 2:
        wanted = cut_lines(wanted, cap // 2, "the instruction").rstrip()
    assert text.endswith(f"\n{wanted}\n")


@settings(max_examples=150, deadline=None)
@given(
    preamble=line_text.map(lambda text: f"{text}\n\n"),
    rest=fenced_text,
    slash=st.one_of(st.none(), st.sampled_from(["/skill", "/thirdshift-implement #7", "/a b c"])),
)
def test_a_preamble_goes_after_a_leading_slash_command_and_before_any_other_prompt(
    preamble: str, rest: str, slash: str | None
) -> None:
    """The CLI reads a slash command only on line one: a preamble put before the prompt keeps
    it there, and the prompt's own text follows the preamble unchanged."""
    prompt = rest if slash is None else f"{slash}\n{rest}"
    placed = before_prompt(preamble, prompt)
    if slash is not None:
        assert placed == f"{slash}\n{preamble}{rest}"
        assert placed.split("\n", 1)[0] == slash
    elif rest.startswith("/"):
        first = rest.partition("\n")[0]
        assert placed.startswith(f"{first}\n{preamble}")
    else:
        assert placed == preamble + rest


def test_a_slash_command_alone_gets_the_preamble_on_the_next_line() -> None:
    assert before_prompt("Before.\n\n", "/skill") == "/skill\nBefore.\n\n"


def test_a_repair_prompt_opens_with_its_follow_up_preamble() -> None:
    preamble = follow_up_preamble([session()])
    prompt = ci_fix_prompt(preamble, head="abc1234def", failed=[], inherited=[])
    assert prompt.startswith(preamble + "CI is red on abc1234")
