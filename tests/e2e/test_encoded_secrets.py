"""Encoded secrets end to end (issue 30, adr/0043): `thirdshift run` on the GitHub stand-in with
the real claude CLI, whose scripted agent writes a secret thirdshift knows (the world's GitHub
token, or the model key, as if it had found them) base64-encoded in each alignment, hex-encoded
and reversed, into a committed file and into its pull request text. The push is refused at the
pre-push check naming each line; the published pull request text holds none of the forms; and
no comment, progress line, Session log or database row holds any of them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.scrub import REDACTED

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
MODEL_KEY = "sk-ant-api03-" + "Qm9kZWwta2V5LWZvci10ZXN0cw" * 3
"""The model key the world's Harness is given (it never reaches the agent: adr/0038), written
here as an agent that had found it elsewhere would."""
SECRETS = {"token": TOKEN, "model key": MODEL_KEY}


def forms_of(secret: str) -> dict[str, str]:
    """How the agent hides ``secret``: base64 after 0, 1 and 2 other bytes (each alignment),
    hex and reversed."""
    raw = secret.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64 after one byte": base64.b64encode(b"k" + raw).decode(),
        "base64 after two bytes": base64.b64encode(b"k=" + raw).decode(),
        "hex": raw.hex(),
        "reversed": secret[::-1],
    }


def hidden(secret: str) -> str:
    return "\n".join(f"{name}: {form}" for name, form in forms_of(secret).items()) + "\n"


def traces(secret: str) -> list[str]:
    """What must appear nowhere: the middle of each base64 text, the hex and the reversed
    secret (a base64 text holds the secret's form only in its middle, adr/0043)."""
    return [form[4:-4] for form in forms_of(secret).values()]


def secret_world(tmp_path: Path, secret: str, sessions: list[dict[str, object]]) -> RunWorld:
    world = start_world(tmp_path, sessions)
    world.settings["ANTHROPIC_API_KEY"] = MODEL_KEY
    return world


def _sessions(*commands: str) -> list[dict[str, object]]:
    """The implement session: fix add(), run ``commands`` (each one turn), and finish."""
    fix = write_file_command("calc.py", CALC_FIXED) + " && git commit -qam 'Make add() add'"
    turns: list[dict[str, object]] = [{"tool_calls": [bash(fix, "fix")]}]
    turns += [{"tool_calls": [bash(command, "work")]} for command in commands]
    turns.append({"text": "Done."})
    return [{"name": "implement", "marker": MARKER, "turns": turns}]


def _everything(world: RunWorld, *outputs: str) -> str:
    """All thirdshift said and kept: its output, the issue's comments, every pull request's
    text, the Session logs and the database."""
    texts = [*outputs, *(str(c["body"]) for c in world.comments())]
    texts += [f"{p['title']}\n{p['body']}" for p in world.pulls()]
    texts += [path.read_text() for path in (world.home / "logs").rglob("*") if path.is_file()]
    texts.append((world.home / "thirdshift.db").read_bytes().decode(errors="replace"))
    return "\n".join(texts)


@pytest.mark.parametrize("which", list(SECRETS))
def test_a_file_holding_a_known_secret_encoded_is_not_pushed_and_each_line_is_named(
    tmp_path: Path, worlds: list[RunWorld], which: str
) -> None:
    """Each encoded line is the secret: nothing is pushed, the Run names stolen.txt's five
    lines and how each is encoded, and no form of the secret is said or kept anywhere."""
    secret = SECRETS[which]
    commit = (
        write_file_command("stolen.txt", hidden(secret))
        + " && git add stolen.txt && git commit -qm 'Add notes'"
    )
    text = f"add() subtracted.\n\n{hidden(secret)}\nCloses #1"
    world = secret_world(tmp_path, secret, _sessions(commit, pull_request_file("Fix", text)))
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    named = [
        "stolen.txt:1 (known secret value, base64)",
        "stolen.txt:2 (known secret value, base64)",
        "stolen.txt:3 (known secret value, base64)",
        "stolen.txt:4 (known secret value, hex)",
        "stolen.txt:5 (known secret value, reversed)",
    ]
    assert f"its commits add what looks like a secret at {', '.join(named)}" in result.stderr
    assert "issue-1" not in world.git("ls-remote", "--heads", world.remote_url)
    assert world.pulls() == []
    [_claim, failure] = world.comments()
    assert "stolen.txt:1" in failure["body"]
    everything = _everything(world, result.stdout, result.stderr)
    assert [trace for trace in traces(secret) if trace in everything] == []
    assert secret not in everything


@pytest.mark.parametrize("which", list(SECRETS))
def test_a_pull_request_text_holding_a_known_secret_encoded_is_published_without_it(
    tmp_path: Path, worlds: list[RunWorld], which: str
) -> None:
    """The agent's title and body are scrubbed of every form on their way out (adr/0025):
    the pull request is opened, each form replaced, the rest of the text kept."""
    secret = SECRETS[which]
    title = f"Make add() add ({secret[::-1]})"
    body = f"add() subtracted.\n\n{hidden(secret)}\nCloses #1"
    world = secret_world(tmp_path, secret, _sessions(pull_request_file(title, body)))
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    [pull] = world.pulls()
    assert pull["title"] == f"Make add() add ({REDACTED})"
    for name in forms_of(secret):
        assert f"{name}: " in pull["body"]
    assert pull["body"].count(REDACTED) == len(forms_of(secret))
    assert pull["body"].startswith("add() subtracted.")
    everything = _everything(world, result.stdout, result.stderr)
    assert [trace for trace in traces(secret) if trace in everything] == []
    assert secret not in everything
