"""A Run's own page over a scripted page source: its record, timeline, Repairs, replay and
Session log download, a Spec run's Tickets, what it says of a Run that does not exist or of a
database away, who may read it, and the front page's links to it."""

from __future__ import annotations

import dataclasses
import html
import json
import re

from tests.unit.test_status_page import (
    NOW,
    TOKEN,
    ScriptedSource,
    client_of,
    page,
    run,
)
from thirdshift.records import SessionEvent
from thirdshift.web import make_app
from thirdshift.web.app import RUN_PAGE_POLICY
from thirdshift.web.page import LeaseView
from thirdshift.web.run_page import (
    REPLAY_EVENTS,
    Field,
    LogDownload,
    ReplayLine,
    RunLink,
    RunPage,
    SessionView,
    TicketNode,
    download_name,
    replay_lines,
)

HOSTILE = "<script>alert(1)</script>"
BREAKOUT = "</script><script>alert(2)</script>"


def session(
    number: int,
    kind: str,
    *,
    start: float,
    end: float,
    lines: tuple[ReplayLine, ...] = (),
    state: str = "ended",
    model: str | None = "claude-x",
) -> SessionView:
    return SessionView(
        session_id=number + 40,
        number=number,
        name=kind,
        kind=kind,
        harness="claude",
        model=model,
        state=state,
        summary=f"claude ({model}) · {state} · 1m 00s · $0.0100",
        started="2026-03-01 11:55:00 UTC",
        start_seconds=start,
        end_seconds=end,
        running=state == "running",
        tokens=1200,
        cost_usd=0.01,
        error=None,
        killed_work=None,
        final_message="Done.",
        prompt=("Fix issue #11.",),
        prompt_lines=1,
        events=len(lines),
        lines=lines,
        log_name=f"acme-widgets-issue-11-{kind}.jsonl",
    )


IMPLEMENT_LINES = (
    ReplayLine(1, "tool_call", "$ python3 -m pytest -q", "python3 -m pytest -q\nexit 0"),
    ReplayLine(2, "tool_result", "↳ exit 1: 1 failed", failed=True),
    ReplayLine(3, "tool_call", f"Edit {HOSTILE}.py"),
    ReplayLine(4, "message", f"agent: fixed it {BREAKOUT}"),
)


def run_page(**changes: object) -> RunPage:
    shown = RunPage(
        run_id=7,
        generated_at=NOW,
        subject="acme/widgets#11",
        kind="run",
        state="succeeded",
        outcome="ready",
        head="abc1234",
        fields=(
            Field("Kind", "run"),
            Field("Issue", "acme/widgets#11", "https://github.com/acme/widgets/issues/11"),
            Field("Pull request", "#12", "https://github.com/acme/widgets/pull/12"),
            Field("Cause", HOSTILE),
        ),
        lease="held by daemon night:1, fencing token 3, until 2026-03-01 12:05:00 UTC",
        sessions=(
            session(1, "implement", start=2.0, end=62.0, lines=IMPLEMENT_LINES),
            session(2, "repair-1", start=80.0, end=95.5, model=BREAKOUT),
        ),
        earlier=(RunLink(5, "acme/widgets#11", "failed", "CI red"),),
        activity=("2026-03-01 11:55:00 UTC start: picked up",),
    )
    return dataclasses.replace(shown, **changes)  # type: ignore[arg-type]


def timeline_of(text: str) -> list[dict[str, object]]:
    found = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>', text)
    assert found is not None, text
    data: list[dict[str, object]] = json.loads(found[1])
    return data


def test_a_run_page_shows_its_record_timeline_repairs_and_each_session_replayed() -> None:
    source = ScriptedSource([page()], runs={7: run_page()})
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    answer = client.get("/runs/7")

    assert answer.status_code == 200
    text = answer.text
    assert 'data-run="7" data-state="succeeded"' in text
    assert '<a href="https://github.com/acme/widgets/issues/11">acme/widgets#11</a>' in text
    assert '<a href="https://github.com/acme/widgets/pull/12">#12</a>' in text
    assert "held by daemon night:1, fencing token 3" in text
    assert '<strong class="succeeded">ready</strong>' in text
    # One bar per session, on seconds since the Run started, with what the tooltip says.
    bars = timeline_of(text)
    assert [(b["label"], b["start"], b["end"]) for b in bars] == [
        ("1. implement", 2.0, 62.0),
        ("2. repair-1", 80.0, 95.5),
    ]
    assert bars[0] | {"harness": "claude", "model": "claude-x", "tokens": 1200} == bars[0]
    assert '<tr data-repair="42">' in text  # the Repair, and only it, in its table
    assert 'data-repair="41"' not in text
    assert '<li value="1" class="tool_call" data-kind="tool_call">' in text
    assert '<li value="2" class="tool_result failed"' in text
    assert 'href="7/sessions/41/log" download="acme-widgets-issue-11-implement.jsonl"' in text
    assert '<a href="5">Run 5</a>' in text
    assert '<script src="../static/run-page.js"></script>' in text


def test_what_agents_wrote_stays_text_on_the_run_page() -> None:
    """Agent text is escaped in the page, and the timeline's JSON cannot close its script;
    the page's scripts are the package's own files only."""
    source = ScriptedSource([page()], runs={7: run_page()})
    answer = client_of(make_app(source, token=TOKEN), bearer=True).get("/runs/7")

    text = answer.text
    assert HOSTILE not in text
    assert BREAKOUT not in text
    assert html.escape(HOSTILE, quote=False) in text
    assert timeline_of(text)[1]["model"] == BREAKOUT  # the JSON holds it, inert
    assert answer.headers["content-security-policy"] == RUN_PAGE_POLICY
    assert "script-src 'self'" in RUN_PAGE_POLICY
    assert not re.search(r"<script>(?!\s*</script>)", text)  # no inline script


def test_a_run_that_does_not_exist_is_a_404_page_saying_so() -> None:
    client = client_of(make_app(ScriptedSource([page()]), token=TOKEN), bearer=True)

    answer = client.get("/runs/404")

    assert answer.status_code == 404
    assert "The database has no Run 404." in answer.text
    assert "timeline-data" not in answer.text
    assert client.get("/runs/not-a-number").status_code == 404


def test_while_the_database_is_unreachable_the_run_page_says_so_with_503() -> None:
    down = RunPage(run_id=7, generated_at=NOW, database_error="database unreachable: refused")
    source = ScriptedSource([page()], runs={7: down})
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    answer = client.get("/runs/7")

    assert answer.status_code == 503
    assert '<p class="failed" role="alert">database unreachable: refused</p>' in answer.text


def test_the_run_page_and_its_logs_ask_for_the_token() -> None:
    """The token check covers every route: a Run's page and its Session logs too."""
    log = LogDownload("a.jsonl", iter([b"{}\n"]))
    source = ScriptedSource([page()], runs={7: run_page()}, logs={(7, 41): log})
    client = client_of(make_app(source, token=TOKEN))

    for path in ("/runs/7", "/runs/7/sessions/41/log", "/static/run-page.js"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "a token is required" in refused.text
    assert client.get("/runs/7", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_a_session_log_downloads_as_an_attachment_of_json_lines() -> None:
    lines = [b'{"type": "system"}\n', b'{"type": "result"}\n']
    source = ScriptedSource(
        [page()], logs={(7, 41): LogDownload("acme-widgets-issue-11-implement.jsonl", iter(lines))}
    )
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    answer = client.get("/runs/7/sessions/41/log")

    assert answer.status_code == 200
    assert answer.content == b"".join(lines)
    assert answer.headers["content-type"] == "application/x-ndjson"
    assert answer.headers["content-disposition"] == (
        'attachment; filename="acme-widgets-issue-11-implement.jsonl"'
    )
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_session_log_that_cannot_be_had_is_a_plain_message_with_its_status() -> None:
    gone = LogDownload("x.jsonl", None, "the Session log of Run 7's implement session is gone", 404)
    source = ScriptedSource([page()], logs={(7, 41): gone})
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    answer = client.get("/runs/7/sessions/41/log")
    other = client.get("/runs/7/sessions/99/log")

    assert (answer.status_code, answer.text) == (
        404,
        "the Session log of Run 7's implement session is gone\n",
    )
    assert answer.headers["content-type"].startswith("text/plain")
    assert (other.status_code, other.text) == (404, "Run 7 has no session 99\n")


def test_a_spec_run_shows_its_tickets_as_a_tree_of_linked_ticket_runs() -> None:
    landed = RunLink(8, "acme/widgets#4", "succeeded", "merged")
    failed = RunLink(9, "acme/widgets#5", "failed", "CI red")
    spec = run_page(
        kind="spec",
        tickets=(
            TicketNode(4, "landed by Run 8, PR #20", landed, (landed,)),
            TicketNode(5, "failed: CI red", None, (failed,)),
        ),
    )
    ticket = run_page(run_id=8, spec_run=RunLink(7, "acme/widgets#3", "running", "-"))
    source = ScriptedSource([page()], runs={7: spec, 8: ticket})
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    tree = client.get("/runs/7").text
    back = client.get("/runs/8").text

    assert "Spec run 7</span>" in tree
    assert '<li data-ticket="4">#4: landed by Run 8, PR #20 · <a href="8">Run 8</a>' in tree
    assert '<li data-ticket-run="9"><a href="9">Run 9</a>' in tree
    assert "#5: failed: CI red" in tree
    assert '<a href="7" data-spec-run="7">Spec run 7</a>' in back


def test_every_run_on_the_front_page_links_to_its_page() -> None:
    """In flight, recent, failures, and each Lease held by a Run."""
    failed = run(3, "failed", cause="CI red")
    shown = dataclasses.replace(
        page(run(1, "running"), run(2, "succeeded"), failures=(failed,)),
        leases=(LeaseView("acme/widgets", page().leases[0].lease),),
    )
    client = client_of(make_app(ScriptedSource([shown]), token=TOKEN), bearer=True)

    text = client.get("/").text

    for run_id in (1, 2, 3):
        assert f'href="runs/{run_id}">' in text, run_id
    held = page().leases[0].run_id
    assert f'<td class="hide-narrow"><a href="runs/{held}">{held}</a></td>' in text
    assert f'href="runs/{held}"' in client.get("/live").text


def test_a_long_session_is_replayed_by_its_first_and_last_events_with_the_gap_counted() -> None:
    events = [SessionEvent(n, "tool_call", f"$ step {n}") for n in range(1, REPLAY_EVENTS + 51)]

    lines = replay_lines(events, str)

    half = REPLAY_EVENTS // 2
    assert len(lines) == REPLAY_EVENTS + 1
    assert [line.text for line in lines[:2]] == ["$ step 1", "$ step 2"]
    assert lines[half].kind == "gap"
    assert lines[half].text.startswith("… 50 events left out here")
    assert lines[-1].text == f"$ step {REPLAY_EVENTS + 50}"
    assert len(replay_lines(events[:REPLAY_EVENTS], str)) == REPLAY_EVENTS


def test_a_replayed_event_reads_as_the_post_mortem_reads_it_scrubbed() -> None:
    """A tool call keeps its whole command beside its progress line when the line shows less;
    a result that failed is marked; every text is scrubbed."""
    events = [
        SessionEvent(1, "tool_call", "$ make test", tool="Bash", target="make test\nmake lint"),
        SessionEvent(2, "tool_call", "Edit calc.py", tool="Edit", target="calc.py"),
        SessionEvent(3, "tool_result", "2 failed", exit_status=2),
        SessionEvent(4, "tool_result", "ok", exit_status=0),
        SessionEvent(5, "message", "the token is s3cret"),
        SessionEvent(6, "error", "the CLI died"),
    ]

    lines = replay_lines(events, lambda text: text.replace("s3cret", "[REDACTED]"))

    assert [(line.kind, line.text, line.detail, line.failed) for line in lines] == [
        ("tool_call", "$ make test", "make test\nmake lint", False),
        ("tool_call", "Edit calc.py", None, False),
        ("tool_result", "↳ exit 2: 2 failed", None, True),
        ("tool_result", "↳ ok", None, False),
        ("message", "agent: the token is [REDACTED]", None, False),
        ("error", "error: the CLI died", None, True),
    ]


def test_a_log_s_file_name_is_fit_for_a_header() -> None:
    assert download_name("acme-widgets-issue-3-repair-1.jsonl") == (
        "acme-widgets-issue-3-repair-1.jsonl"
    )
    assert download_name('a"b\r\n;c.jsonl') == "a_b___c.jsonl"
    assert download_name("..") == "session.jsonl"


def test_a_session_still_running_shows_how_long_so_far() -> None:
    running = run_page(sessions=(session(1, "implement", start=0.0, end=30.0, state="running"),))
    client = client_of(make_app(ScriptedSource([page()], runs={7: running}), token=TOKEN))

    text = client.get("/runs/7", headers={"Authorization": f"Bearer {TOKEN}"}).text

    assert "<td>30 so far</td>" in text
    assert timeline_of(text)[0]["running"] is True


def test_a_log_s_address_with_the_token_sets_the_cookie_and_returns_to_the_same_log() -> None:
    """``?token=`` on a log's address sets the cookie and sends the browser back to the same
    address, never elsewhere."""
    log = LogDownload("a.jsonl", iter([b"{}\n"]))
    source = ScriptedSource([page()], logs={(7, 41): log})
    client = client_of(make_app(source, token=TOKEN))

    opened = client.get(f"/runs/7/sessions/41/log?token={TOKEN}", follow_redirects=False)

    assert opened.status_code == 303
    # Relative: behind a proxy's prefix (public_url) it stays under the prefix.
    assert opened.headers["location"] == "./log"
