"""Notifications end to end: `thirdshift run` against the stand-in and the real claude CLI, with
a webhook receiver in the test. Each Run end sends exactly one signed, scrubbed message; a
receiver that answers 500 is a warning, and the Run ends as it would have."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.real_cli

ISSUE_MARKER = "calc.add(2, 3) returns -1"
PLANTED = "ghp_" + "N0tified" * 5  # token-shaped, as if the agent printed a secret
SECRET = "webhook-shared-secret-for-the-test"


def implement(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"name": "implement", "marker": ISSUE_MARKER, "turns": list(turns)}


def notifying(world: RunWorld, receiver: WebhookReceiver) -> None:
    world.settings["THIRDSHIFT_NOTIFY_WEBHOOK_URL"] = receiver.url
    world.settings["THIRDSHIFT_NOTIFY_WEBHOOK_SECRET"] = SECRET


def verified(body: bytes, header: str) -> bool:
    """What a receiver does: the HMAC-SHA256 of the exact body with the shared secret."""
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


def test_a_successful_run_sends_one_signed_message_and_a_500_is_only_a_warning(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The Run ends ready: one POST, signed, naming the Run, issue, pull request and cost, with
    no planted secret; the receiver's 500 is a warning line and the Run still exits 0."""
    world = start_world(
        tmp_path,
        [
            implement(
                {"tool_calls": [bash(f"echo {PLANTED}", "print a secret")]},
                {
                    "tool_calls": [
                        bash(
                            write_file_command("calc.py", CALC_FIXED)
                            + " && git add calc.py && git commit -qm 'Make add() add' && "
                            + pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1"),
                            "fix",
                        )
                    ]
                },
                {"text": "Fixed add()."},
            )
        ],
    )
    worlds.append(world)
    with WebhookReceiver(status=500) as receiver:
        notifying(world, receiver)

        result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    pull = world.pulls()[0]
    assert result.stdout == pull["html_url"] + "\n"
    [delivery] = receiver.received
    assert delivery.headers["content-type"] == "application/json"
    assert delivery.headers["x-thirdshift-event"] == "run.ended"
    assert verified(delivery.body, delivery.headers["x-thirdshift-signature-256"])
    message = json.loads(delivery.body)
    assert message["event"] == "run.ended"
    assert (message["run_id"], message["state"], message["kind"]) == (1, "ready", "run")
    assert message["repository"] == f"{OWNER}/{NAME}"
    assert message["issue_number"] == 1
    assert message["issue_url"] == world.issue_url
    assert message["pull_request_url"] == pull["html_url"]
    assert message["cause"] is None
    assert isinstance(message["cost_usd"], float)
    assert "implement · claude" in message["post_mortem"]
    assert "thirdshift show 1" in message["post_mortem"]
    port = receiver.url.split(":")[2].split("/")[0]
    assert f"warning: could not notify webhook http://127.0.0.1:{port} of Run 1: answered 500" in (
        result.stderr
    )
    assert PLANTED not in delivery.body.decode()
    assert SECRET not in result.stderr
    assert "/hooks/thirdshift" not in result.stderr  # the URL's path may be a secret


def test_a_failed_run_sends_one_scrubbed_message_with_its_post_mortem(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The agent prints a secret and leaves no work: the Run fails as it always did (exit 1,
    the Failed-run comment, now with a readable Post-mortem), and the receiver gets one message
    with the cause and the Post-mortem's short form, the secret scrubbed."""
    world = start_world(
        tmp_path,
        [implement({"tool_calls": [bash(f"echo {PLANTED}", "print a secret")]}, {"text": "Done."})],
    )
    worlds.append(world)
    with WebhookReceiver(status=204) as receiver:
        notifying(world, receiver)

        result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    [delivery] = receiver.received
    assert verified(delivery.body, delivery.headers["x-thirdshift-signature-256"])
    message = json.loads(delivery.body)
    assert (message["run_id"], message["state"]) == (1, "failed")
    assert message["cause"]
    assert message["cause"] in result.stderr
    assert "Last lines of implement:" in message["post_mortem"]
    assert "$ echo [REDACTED]" in message["post_mortem"]
    assert PLANTED not in delivery.body.decode()
    assert "notified webhook http://127.0.0.1:" in result.stderr
    _claim, failure = world.comments()
    body = failure["body"]
    assert "**What the agent did last** (Session `implement`)" in body
    assert "$ echo [REDACTED]" in body
    assert "agent: Done." in body
    assert "- `implement · claude" in body
    assert "`thirdshift show 1`" in body
    assert "`thirdshift logs 1`" in body
    assert PLANTED not in body


def fix() -> dict[str, Any]:
    return {
        "tool_calls": [
            bash(
                write_file_command("calc.py", CALC_FIXED)
                + " && git add calc.py && git commit -qm 'Make add() add' && "
                + pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1"),
                "fix",
            )
        ]
    }


def test_a_merge_run_sends_one_message_saying_merged(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    world = start_world(tmp_path, [implement(fix(), {"text": "Fixed add()."})])
    worlds.append(world)
    with WebhookReceiver(status=204) as receiver:
        notifying(world, receiver)

        result = world.thirdshift("run", "--merge", world.issue_url)

    assert result.returncode == 0, result.stderr
    [delivery] = receiver.received
    assert verified(delivery.body, delivery.headers["x-thirdshift-signature-256"])
    message = json.loads(delivery.body)
    assert (message["type"], message["version"]) == ("notification", 1)
    assert (message["run_id"], message["state"], message["kind"]) == (1, "merged", "merge")
    assert message["cause"] is None
    assert message["pull_request_url"] == world.pulls()[0]["html_url"]
    assert world.pulls()[0]["merged_at"] is not None


def test_an_interrupted_run_sends_one_message_saying_interrupted(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Ctrl-C while the session works: the work is saved as a Failed run, and its end is
    announced once as `interrupted`, with the Post-mortem."""
    stall = {
        "tool_calls": [
            bash(
                f"echo {PLANTED} > DRAFT.md && python3 -c 'import time; time.sleep(300)'",
                "long wait",
            )
        ]
    }
    world = start_world(tmp_path, [implement(stall)])
    worlds.append(world)
    with WebhookReceiver(status=204) as receiver:
        notifying(world, receiver)
        process = world.start_thirdshift("run", world.issue_url, new_group=True)
        world.wait_for_process("time.sleep(300)")
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    [delivery] = receiver.received
    assert verified(delivery.body, delivery.headers["x-thirdshift-signature-256"])
    message = json.loads(delivery.body)
    assert (message["run_id"], message["state"], message["kind"]) == (1, "interrupted", "run")
    assert message["cause"] == "interrupted"
    assert "Last lines of implement:" in message["post_mortem"]
    assert PLANTED not in delivery.body.decode()
