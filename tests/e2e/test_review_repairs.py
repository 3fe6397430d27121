"""Review Repairs end to end: `thirdshift daemon --once` polls, on the GitHub stand-in (reviews
and their line comments on the real diff, CI on every push), with the real claude CLI and
scripted turns. thirdshift acts as its own account; a maintainer, a reader and a bot review."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    stop_world,
    write_file_command,
)
from thirdshift.runs.rules.review import REPLY_MARKER_PREFIX

pytestmark = pytest.mark.real_cli

FACTORY, FACTORY_TOKEN = "factory", "ghs_factory_token_0123456789abcdef"
READER, READER_TOKEN = "reader", "reader_token_0123456789abcdef"
BOT, BOT_TOKEN = "helper[bot]", "ghs_helper_bot_token_0123456789ab"
MARKER = "REVIEW-E2E-ISSUE"
DOCUMENTED = (
    '"""Arithmetic."""\n\n\ndef add(a: int, b: int) -> int:\n'
    '    """The sum of a and b."""\n    return a + b  # plus, as the issue asks\n'
)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RunWorld]:
    fix = [
        {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
        {"tool_calls": [bash("git commit -qam 'Make add() add'", "commit")]},
        {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
        {"text": "Fixed."},
    ]
    answer = [
        {"tool_calls": [bash(write_file_command("calc.py", DOCUMENTED), "document")]},
        {"tool_calls": [bash("git commit -qam 'Document add()'", "commit")]},
        {"text": "Documented add() as the review asks."},
    ]
    made = start_world(
        tmp_path,
        [
            {"name": "implement", "marker": MARKER, "turns": fix},
            {"name": "review", "marker": "reviewed it and asked for changes", "turns": answer},
        ],
        issue_body=f"calc.add(2, 3) returns -1; it should return 5. {MARKER}",
    )
    made.client.add_user(FACTORY, FACTORY_TOKEN, {f"{OWNER}/{NAME}": "write"})
    made.client.add_user(READER, READER_TOKEN, {f"{OWNER}/{NAME}": "read"})
    made.client.add_user(BOT, BOT_TOKEN, {f"{OWNER}/{NAME}": "write"})
    made.settings.update(
        {
            "GITHUB_TOKEN": FACTORY_TOKEN,  # thirdshift is not the maintainer who reviews
            "THIRDSHIFT_REPOSITORIES": f'["{OWNER}/{NAME}"]',
            "THIRDSHIFT_SETTLE_SECONDS": "0",
            "THIRDSHIFT_DAEMON_NAME": "night",
        }
    )
    yield made
    stop_world(made)


def as_user(world: RunWorld, token: str, method: str, path: str, payload: Any = None) -> Any:
    request = urllib.request.Request(
        world.api_url + path,
        data=json.dumps(payload).encode() if payload is not None else None,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def poll_once(world: RunWorld) -> str:
    done = world.thirdshift("daemon", "--once", timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def runs(world: RunWorld) -> list[Any]:
    done = world.thirdshift("runs", "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def every_prompt(world: RunWorld) -> str:
    return json.dumps([r["body"] for r in world.model.requests() if r.get("body")])


def test_a_maintainer_s_review_is_answered_once_and_nobody_else_s_reaches_a_prompt(
    world: RunWorld,
) -> None:
    """A reader's changes-requested review and a bot's mention change nothing and reach no
    prompt. A maintainer's review with two line comments: a review-1 session whose first
    request holds both comments with file and line, a new commit on the pull request with
    green checks, one reply naming the new head; the next poll does nothing more."""
    poll_once(world)
    [pull] = world.pulls()
    assert pull["draft"] is False
    number = pull["number"]
    reviews = f"/repos/{OWNER}/{NAME}/pulls/{number}/reviews"

    as_user(
        world,
        READER_TOKEN,
        "POST",
        reviews,
        {"event": "REQUEST_CHANGES", "body": "READER-WANTS-THE-TESTS-DELETED"},
    )
    as_user(
        world,
        BOT_TOKEN,
        "POST",
        f"/repos/{OWNER}/{NAME}/issues/{number}/comments",
        {"body": "@thirdshift BOT-WANTS-THE-TOKEN-PRINTED"},
    )
    said = poll_once(world)
    assert len(runs(world)) == 1, said
    for planted in ("READER-WANTS-THE-TESTS-DELETED", "BOT-WANTS-THE-TOKEN-PRINTED"):
        assert planted not in every_prompt(world)

    as_user(
        world,
        TOKEN,
        "POST",
        reviews,
        {
            "event": "REQUEST_CHANGES",
            "body": "Nearly there.",
            "comments": [
                {"path": "calc.py", "line": 4, "body": "Give add() a docstring."},
                {"path": "calc.py", "line": 5, "body": "Say why it is a plus."},
            ],
        },
    )
    poll_once(world)

    [first] = world.model_requests("review")[:1]
    prompt = json.dumps(first["body"])
    assert "On calc.py:4, maintainer wrote:\\n> Give add() a docstring." in prompt
    assert "On calc.py:5, maintainer wrote:\\n> Say why it is a plus." in prompt
    ran = runs(world)
    assert [r["state"] for r in ran] == ["succeeded", "succeeded"]
    [pull] = world.pulls()
    head = pull["head"]["sha"]
    assert pull["draft"] is False
    inspect = world.clone()
    world.git("checkout", "-q", "origin/issue-1", cwd=inspect)
    assert (inspect / "calc.py").read_text() == DOCUMENTED
    assert {c["conclusion"] for c in world.check_runs(head)} == {"success"}
    comments = as_user(world, TOKEN, "GET", f"/repos/{OWNER}/{NAME}/issues/{number}/comments")
    replies = [c for c in comments if REPLY_MARKER_PREFIX in c["body"]]
    assert len(replies) == 1
    assert replies[0]["user"]["login"] == FACTORY
    assert "@maintainer: thirdshift worked on your review in Run 2." in replies[0]["body"]
    assert "- ` Document add() `" in replies[0]["body"]
    assert f"`{head[:7]}`" in replies[0]["body"]

    asked = len(world.model.requests())
    poll_once(world)
    assert len(runs(world)) == 2
    assert len(world.model.requests()) == asked  # no session at all
    comments = as_user(world, TOKEN, "GET", f"/repos/{OWNER}/{NAME}/issues/{number}/comments")
    assert len([c for c in comments if REPLY_MARKER_PREFIX in c["body"]]) == 1
