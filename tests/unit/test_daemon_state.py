"""A daemon's published state: written whole, read back, and judged live or not."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from thirdshift.daemon.state import (
    STALE_SECONDS,
    DaemonProcess,
    DaemonState,
    HarnessHolds,
    MissingHarness,
    PauseState,
    PollState,
    RunningState,
    is_live,
    read_states,
    write_state,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def state() -> DaemonState:
    return DaemonState(
        daemon=DaemonProcess("night/1", os.getpid(), NOW - timedelta(hours=1)),
        updated_at=NOW,
        stopping=False,
        polls=(PollState("acme/widgets", NOW, None, NOW + timedelta(seconds=60), (4, 7)),),
        running=(RunningState("acme/widgets", 3, 12, NOW - timedelta(minutes=4)),),
        holds=HarnessHolds(
            (PauseState("claude", NOW + timedelta(minutes=5), "overloaded (529)"),),
            (MissingHarness("codex", "codex is not installed: gone; run scripts/install"),),
        ),
        rate_limit_remaining=4870,
    )


def test_a_state_is_written_whole_under_a_safe_name_and_read_back(tmp_path: Path) -> None:
    write_state(tmp_path, state())

    assert [p.name for p in tmp_path.iterdir()] == ["night_1.json"]
    [read] = read_states(tmp_path)
    assert (read["type"], read["version"], read["daemon"]) == ("daemon_state", 1, "night/1")
    assert read["repositories"] == [
        {
            "repository": "acme/widgets",
            "last_poll_at": "2026-03-01T12:00:00+00:00",
            "last_poll_error": None,
            "next_poll_at": "2026-03-01T12:01:00+00:00",
            "queued": [4, 7],
            "next_architect_at": None,
        }
    ]
    assert read["running"][0]["run_id"] == 12
    assert read["pauses"] == [
        {"harness": "claude", "until": "2026-03-01T12:05:00+00:00", "condition": "overloaded (529)"}
    ]
    assert read["missing_harnesses"] == [
        {"harness": "codex", "problem": "codex is not installed: gone; run scripts/install"}
    ]
    assert (read["rate_limit_remaining"], read["stopped"]) == (4870, False)


def test_garbage_beside_the_states_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"no": "updated_at"}))
    write_state(tmp_path, state())
    assert [s["daemon"] for s in read_states(tmp_path)] == ["night/1"]
    assert read_states(tmp_path / "missing") == []


def test_a_state_file_still_being_written_is_not_read_as_a_second_daemon(tmp_path: Path) -> None:
    """The file being written sits beside its target until it replaces it; once whole, it must
    not show the same daemon twice (nor, half written, break a reader that globs ``*.json``)."""
    write_state(tmp_path, state())
    whole = (tmp_path / "night_1.json").read_text()
    (tmp_path / ".state-abc.json").write_text(whole)  # as an older version named it
    assert [s["daemon"] for s in read_states(tmp_path)] == ["night/1"]
    # A daemon whose name starts with a dot is still a daemon.
    dotted = state()
    write_state(tmp_path, replace(dotted, daemon=replace(dotted.daemon, name=".night")))
    assert sorted(s["daemon"] for s in read_states(tmp_path)) == [".night", "night/1"]


def test_a_daemon_is_live_while_it_writes_lately_and_its_process_is_alive() -> None:
    written = json.loads(json.dumps({"updated_at": NOW.isoformat(), "pid": os.getpid()}))
    assert is_live(written, NOW + timedelta(seconds=5))
    assert not is_live(written, NOW + timedelta(seconds=STALE_SECONDS + 1))
    assert not is_live({**written, "stopped": True}, NOW)
    dead = subprocess.Popen(["true"])  # a pid that has exited
    dead.wait()
    assert not is_live({**written, "pid": dead.pid}, NOW)
    assert not is_live({"updated_at": "yesterday", "pid": 1}, NOW)


def test_a_state_file_cut_short_edited_or_from_another_version_is_left_out(
    tmp_path: Path,
) -> None:
    write_state(tmp_path, state())
    good = json.loads((tmp_path / "night_1.json").read_text())
    bad = [
        {**good, "updated_at": "garbage"},
        {**good, "updated_at": "2026-03-01T12:00:00"},  # no time zone
        {key: value for key, value in good.items() if key != "daemon"},
        {**good, "running": [{"repository": "acme/widgets"}]},
        {**good, "pauses": "none"},
        {**good, "missing_harnesses": "codex"},
        {**good, "missing_harnesses": [7]},
        {**good, "missing_harnesses": ["codex"]},
    ]
    for index, text in enumerate(bad):
        (tmp_path / f"bad-{index}.json").write_text(json.dumps(text))

    assert [s["daemon"] for s in read_states(tmp_path)] == ["night/1"]


def test_a_state_an_older_version_wrote_without_missing_harnesses_is_read(
    tmp_path: Path,
) -> None:
    write_state(tmp_path, state())
    older = json.loads((tmp_path / "night_1.json").read_text())
    del older["missing_harnesses"]
    (tmp_path / "night_1.json").write_text(json.dumps(older))

    assert [s["daemon"] for s in read_states(tmp_path)] == ["night/1"]
