"""A Failed run recorded in a real store, whose Session log holds a secret that should never have
been written there: what the status page must show with its cause, and scrub on the way out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thirdshift.records import Run, Usage
from thirdshift.run_states import RunState
from thirdshift.store import Store

CAUSE = "CI failed on 3f2a9c1 after 2 Repairs (unit tests): add(2, 3) == -1"
COST_USD = 0.42


@dataclass(frozen=True)
class PlantedFailure:
    run: Run
    log_path: Path
    secret: str


def _assistant(seq: int, content: dict[str, Any]) -> dict[str, Any]:
    message = {"id": f"m{seq}", "type": "message", "role": "assistant", "model": "claude-x"}
    return {"type": "assistant", "message": {**message, "content": [content]}}


def _bash(seq: int, command: str, description: str | None = None) -> dict[str, Any]:
    given = {"command": command} | ({"description": description} if description else {})
    return _assistant(seq, {"type": "tool_use", "id": f"t{seq}", "name": "Bash", "input": given})


def session_log_lines(secret: str) -> list[dict[str, Any]]:
    """A Claude Code stream whose condensed lines end with a command that names ``secret``."""
    return [
        {"type": "system", "subtype": "init", "session_id": "s-1", "tools": [], "model": "x"},
        _bash(1, "python3 -m unittest -v", "run the tests"),
        _bash(2, "sed -i 's/a - b/a + b/' calc.py", "fix add()"),
        _bash(3, f'curl -H "Authorization: token {secret}" https://ci.invalid/logs'),
        {"type": "result", "subtype": "success", "is_error": False, "result": "gave up"},
    ]


def plant_failed_run(
    store: Store, owner: str, name: str, issue_number: int, log_dir: Path, secret: str
) -> PlantedFailure:
    """Record a Run on ``owner/name#issue_number`` that failed in its ``repair-2`` session,
    with a priced ledger line, and write that session's log under ``log_dir``."""
    repository = store.ensure_repository(owner, name)
    run = store.start_run(
        repository, issue_number, base_branch="main", issue_branch=f"issue-{issue_number}",
        harness="claude",
    )  # fmt: skip
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{owner}-{name}-issue-{issue_number}-repair-2.jsonl"
    log_path.write_text("".join(json.dumps(line) + "\n" for line in session_log_lines(secret)))
    session = store.start_session(
        run.id, "repair-2", harness="claude", log_path=str(log_path), prompt="Fix CI."
    )
    store.end_session(
        session.id,
        state="failed",
        error="CI still red",
        usage=Usage(turns=3, cost_usd=COST_USD, cost_source="reported", model="claude-x"),
    )
    failed = store.finish_run(run.id, RunState.FAILED, cause=CAUSE, last_session_log=str(log_path))
    return PlantedFailure(failed, log_path, secret)
