"""The daemon demo's model script: each Ready issue finds its own session, the CI-fix Repair
finds its own, and every Harness's tool calls are named its way."""

from __future__ import annotations

from thirdshift.harness_registry import HARNESS_NAMES
from thirdshift.sandbox.demo import model_script
from thirdshift.sandbox.demo_issues import DEMO_ISSUES, DEMO_SPECS, REPAIR_MARKER, daemon_script
from thirdshift.sandbox.model.server import ModelScript


def test_each_demo_issue_s_body_carries_the_marker_of_its_own_session() -> None:
    """A session is found by the marker in its prompt: each issue's body holds its marker only."""
    sessions = daemon_script()["sessions"]
    markers = [session["marker"] for session in sessions]
    for issue in DEMO_ISSUES:
        assert [m for m in markers if m in issue.body] == [issue.marker]
    for spec in DEMO_SPECS:  # the Spec's marker finds its Spec review
        assert [m for m in markers if m in spec.body] == [spec.marker]
        for ticket in spec.tickets:
            assert [m for m in markers if m in ticket.body] == [ticket.marker]
    assert markers[-1] == REPAIR_MARKER


def test_the_script_loads_with_every_harness_s_tool_names() -> None:
    """Converted for each Harness of the registry, every session's calls use one shell tool and
    the script passes the model server's own checks."""
    for harness in HARNESS_NAMES:
        script = model_script(harness, daemon_script())
        ModelScript.from_dict(script)
        names = {
            call["name"]
            for session in script["sessions"]
            for turn in session["turns"]
            for call in turn.get("tool_calls", [])
        }
        assert len(names) == 1, (harness, names)
        if harness != "claude":
            assert names != {"Bash"}, harness
