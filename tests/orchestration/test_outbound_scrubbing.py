"""The secret corpus through a Failed run's outbound paths: its cause on stderr, the Failed run
record, the issue comment with the Session log's tail, and the pull request's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.orchestration.conftest import RunWorld
from tests.support.scripted_sessions import commit_file
from tests.support.secret_corpus import SECRETS, traces
from thirdshift.sessions import SessionFailed

CORPUS = "\n".join(sample.text for sample in SECRETS)


def test_no_corpus_secret_reaches_a_failed_runs_comment_record_or_lines(world: RunWorld) -> None:
    """A session that fails with every secret in its cause and its log: the cause printed,
    the record and the comment (with the log's tail) keep none of them."""
    number = world.github.add_issue("Add a widget", "", ["ready-for-agent"])
    first = commit_file("widget.txt", "widget\n", "Add the widget", pull_request=f"T\n\n{CORPUS}")

    def fail_loudly(worktree: Path, prompt: str) -> str:
        first(worktree, prompt)
        log = world.settings.home / "logs" / "acme-widgets-issue-1-implement.jsonl"
        with log.open("a") as handle:
            for sample in SECRETS:
                handle.write(sample.text.replace("\n", "\\n") + "\n")
        raise SessionFailed(f"the CLI died saying: {CORPUS}")

    world.sessions.plays["implement"] = fail_loudly

    assert world.run(number) == 1

    [comment] = world.failure_comments(number)
    [run] = world.store.list_runs()
    places = {
        "progress lines": "\n".join(world.lines),
        "issue comment": comment,
        "Failed run record": f"{run.cause}\n{run.killed_work}",
    }
    found = {place: traces(text) for place, text in places.items() if traces(text)}
    print(f"{len(SECRETS)} secrets through {len(places)} outbound paths: {len(found)} with traces")
    assert found == {}
    assert "[REDACTED]" in comment


def test_no_corpus_secret_reaches_the_pull_request_or_the_prompt(world: RunWorld) -> None:
    """The issue body and the pull request file hold every secret: the prompt the session
    gets, the one stored, and the pull request's title and body keep none of them."""
    number = world.github.add_issue("Add a widget", CORPUS, ["ready-for-agent"])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=f"{SECRETS[0].text}\n\n{CORPUS}"
    )

    assert world.run(number) == 0

    [pull] = world.github.pull_requests()
    [run] = world.store.list_runs()
    stored = "\n".join(session.prompt for session in world.store.run_sessions(run.id))
    places = {
        "prompt given": world.sessions.prompts["implement"],
        "prompt stored": stored,
        "pull request title": pull.title,
        "pull request body": pull.body,
    }
    found = {place: traces(text) for place, text in places.items() if traces(text)}
    assert found == {}


# A megabyte of one token prefix, repeated: what a quadratic scrubber spent hours on.
FLOOD = "sk-ant-" * (1_000_000 // len("sk-ant-"))
FLOODED_TOKEN = "sk-ant-api03-" + "Zx9" * 12


@pytest.mark.timeout(120)
def test_a_megabyte_flood_in_a_session_s_output_is_scrubbed_and_the_run_goes_on(
    world: RunWorld,
) -> None:
    """A session that prints a 1 MB line of ``sk-ant-`` repeated, then a token, into its log
    and its dying words: the Run ends as any Failed run does (work pushed, record, comment),
    well within the timeout, and the token is nowhere."""
    number = world.github.add_issue("Add a widget", "", ["ready-for-agent"])

    def flood_and_fail(worktree: Path, prompt: str) -> str:
        (worktree / "draft.txt").write_text("unfinished\n")
        log = world.settings.home / "logs" / "acme-widgets-issue-1-implement.jsonl"
        with log.open("a") as handle:
            handle.write(f"{FLOOD} {FLOODED_TOKEN}\n")
        raise SessionFailed(f"the CLI died printing {FLOOD} {FLOODED_TOKEN}")

    world.sessions.plays["implement"] = flood_and_fail

    assert world.run(number) == 1

    [comment] = world.failure_comments(number)
    [run] = world.store.list_runs()
    assert run.state == "failed"
    assert world.origin_file("issue-1", "draft.txt") == "unfinished"
    everything = "\n".join([*world.lines, comment, run.cause or "", *world.origin_log("issue-1")])
    assert FLOODED_TOKEN not in everything
    assert "[REDACTED]" in comment
