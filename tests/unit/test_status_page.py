"""The status page's application over a scripted page source: what it shows, the JSON behind
it, and who may read it."""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from thirdshift.daemon.state import DaemonProcess, DaemonState, HarnessHolds, MissingHarness
from thirdshift.errors import ConfigError
from thirdshift.records import Lease, Repository, Run
from thirdshift.run_states import RunKind, RunState
from thirdshift.web import make_app
from thirdshift.web.page import LeaseView, Page, PageRun, in_flight_and_ended
from thirdshift.web.run_page import LogDownload, RunPage
from thirdshift.web.server import is_loopback, is_wildcard, own_host_names, parse_address

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def run(
    run_id: int, state: str, *, cause: str | None = None, last_lines: tuple[str, ...] = ()
) -> PageRun:
    record = Run(
        id=run_id,
        repository=Repository(1, "acme", "widgets"),
        issue_number=run_id + 10,
        kind=RunKind.DELIVERY,
        state=RunState(state),
        base_branch="main",
        issue_branch=f"issue-{run_id + 10}",
        head_sha=None,
        pull_request_number=None,
        harness="claude",
        model=None,
        cause=cause,
        killed_work=None,
        last_session_log=None,
        started_at=NOW - timedelta(minutes=5),
        ended_at=None if state == "running" else NOW,
    )
    return PageRun(
        run=record, usage=None, duration="5m 00s", session="implement", last_lines=last_lines
    )


TOKEN = "s3cret-token-s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def client_of(app: Starlette, *, bearer: bool = False) -> TestClient:
    """A client of ``app`` on loopback; with ``bearer``, every request carries the token."""
    return TestClient(app, base_url="http://127.0.0.1:8765", headers=BEARER if bearer else None)


@dataclass
class ScriptedSource:
    pages: list[Page] = field(default_factory=list)
    runs: dict[int, RunPage] = field(default_factory=dict)
    logs: dict[tuple[int, int], LogDownload] = field(default_factory=dict)

    def page(self) -> Page:
        return self.pages[0] if len(self.pages) == 1 else self.pages.pop(0)

    def run_page(self, run_id: int) -> RunPage:
        return self.runs.get(run_id) or RunPage(run_id=run_id, generated_at=NOW, found=False)

    def session_log(self, run_id: int, session_id: int) -> LogDownload:
        missing = LogDownload("", None, f"Run {run_id} has no session {session_id}", 404)
        return self.logs.get((run_id, session_id), missing)


def page(*runs: PageRun, failures: tuple[PageRun, ...] = ()) -> Page:
    return Page(
        generated_at=NOW,
        daemon=None,
        in_flight=tuple(r for r in runs if r.state == "running"),
        recent=tuple(r for r in runs if r.state != "running"),
        failures=failures,
        leases=(LeaseView("acme/widgets", Lease(1, 11, "daemon night:1:ab", 3, 1, NOW, NOW)),),
        cost_today_usd=1.25,
        unpriced_today=1,
    )


def test_the_page_shows_runs_in_flight_with_their_lines_escaped() -> None:
    lines = ("implement: $ pytest -q", "implement: <script>alert(1)</script>")
    source = ScriptedSource([page(run(1, "running", last_lines=lines), run(2, "succeeded"))])
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    html = client.get("/").text

    assert 'data-run="1" data-state="running"' in html
    assert "implement: $ pytest -q" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "$1.25" in html
    assert "+ 1 unpriced" in html
    assert 'name="viewport"' in html


def test_the_live_part_and_the_json_follow_the_source() -> None:
    failed = run(3, "failed", cause="CI red on abc1234 (tests)", last_lines=("repair-1: Edit",))
    source = ScriptedSource(
        [page(run(1, "running")), page(run(1, "succeeded"), failures=(failed,))]
    )
    client = client_of(make_app(source, token=TOKEN), bearer=True)

    first = client.get("/live").text
    then = client.get("/api/status").json()
    assert (then["type"], then["version"]) == ("status_page", 1)

    assert 'data-run="1" data-state="running"' in first
    assert [r["state"] for r in then["recent"]] == ["succeeded"]
    assert then["failures"][0]["cause"] == "CI red on abc1234 (tests)"
    assert (then["failures"][0]["type"], then["failures"][0]["id"]) == ("run", 3)
    assert then["failures"][0]["last_lines"] == ["repair-1: Edit"]
    assert then["leases"][0]["fencing_token"] == 3
    assert then["leases"][0]["repository"] == "acme/widgets"
    assert then["in_flight"] == []


def test_on_loopback_nothing_but_the_health_check_answers_without_the_token() -> None:
    """Loopback is no protection from the daemon's own agents: the page asks for its token
    there too."""
    client = client_of(make_app(ScriptedSource([page()]), token=TOKEN))

    assert client.get("/healthz").status_code == 200
    for path in ("/", "/live", "/api/status"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "?token=" in refused.text
        assert "s3cret-token" not in refused.text
    assert client.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/status", headers=BEARER).status_code == 200


def test_the_page_is_never_made_with_an_empty_token() -> None:
    """An empty token would let an empty ``?token=`` in."""
    with pytest.raises(ConfigError, match="the status page needs a token"):
        make_app(ScriptedSource([page()]), token="")


def test_a_browser_opens_the_page_once_with_the_token_and_keeps_a_cookie() -> None:
    client = client_of(make_app(ScriptedSource([page()]), token=TOKEN))

    opened = client.get(f"/?token={TOKEN}", follow_redirects=False)

    assert opened.status_code == 303
    assert opened.headers["location"] == "./"  # the token leaves the address bar
    assert "httponly" in opened.headers["set-cookie"].lower()
    assert client.get("/live").status_code == 200  # the cookie does
    stranger = client_of(make_app(ScriptedSource([page()]), token=TOKEN))
    assert stranger.get("/?token=nope", follow_redirects=False).status_code == 401


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("[::1]:80", ("::1", 80))],
)
def test_an_address_is_host_and_port(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["8765", "localhost:", ":80", "host:99999", "host:http"])
def test_a_bad_address_shows_the_form(text: str) -> None:
    with pytest.raises(ConfigError, match=r"expected HOST:PORT, for example 127\.0\.0\.1:8765"):
        parse_address(text)


def test_loopback_addresses_are_told_apart_from_the_others() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")  # noqa: S104
    assert not is_loopback("192.168.1.20")


def test_a_request_naming_another_host_is_refused_against_dns_rebinding() -> None:
    """A page on loopback answers only to a loopback name, even to the token: a site the
    operator visits cannot rebind its own name to 127.0.0.1 and read the page."""
    app = make_app(ScriptedSource([page()]), token=TOKEN)
    assert client_of(app, bearer=True).get("/api/status").status_code == 200
    rebound = TestClient(app, base_url="http://attacker.example:8765", headers=BEARER)
    assert rebound.get("/api/status").status_code == 400
    bound = make_app(ScriptedSource([page()]), host="192.168.1.20", token="t" * 32)
    named = TestClient(bound, base_url="http://192.168.1.20:8765")
    assert named.get("/healthz").status_code == 200


def test_the_cookie_holds_no_token_and_is_this_port_s_own() -> None:
    app = make_app(ScriptedSource([page()]), token=TOKEN, port=8765)
    opened = client_of(app).get(f"/?token={TOKEN}", follow_redirects=False)
    cookie = opened.headers["set-cookie"]
    assert cookie.startswith("thirdshift_status_8765=")
    assert "s3cret-token" not in cookie
    assert "samesite=strict" in cookie.lower()
    escaped = client_of(app).get(f"/%2F/evil.example/?token={TOKEN}", follow_redirects=False)
    assert escaped.headers["location"].startswith("./")  # never off to another site
    schemed = client_of(app).get(f"/https:evil.example?token={TOKEN}", follow_redirects=False)
    assert schemed.headers["location"] == "./https:evil.example"  # a path, not a scheme


def test_a_wildcard_bind_answers_to_the_host_s_own_names_and_addresses_only() -> None:
    """Bound to 0.0.0.0 or ::, the page answers a request naming one of the names and addresses
    it was given (the host's own, and http_hosts), IPv6 ones in brackets, and still refuses a
    name it was not given."""
    own = ("buildbox", "buildbox.lan", "192.0.2.7", "fd00::7", "status.example.org")
    app = make_app(ScriptedSource([page()]), host="0.0.0.0", token=TOKEN, also_hosts=own)  # noqa: S104
    for named in ("buildbox", "buildbox.lan", "192.0.2.7", "[fd00::7]", "status.example.org"):
        client = TestClient(app, base_url=f"http://{named}:8765", headers=BEARER)
        assert client.get("/api/status").status_code == 200, named
    elsewhere = TestClient(app, base_url="http://attacker.example:8765", headers=BEARER)
    assert elsewhere.get("/api/status").status_code == 400


def test_the_host_s_own_names_include_its_name_and_loopback() -> None:
    """What a wildcard bind accepts holds the host's name and its addresses, none empty."""
    names = own_host_names()
    assert socket.gethostname().lower() in names
    assert "127.0.0.1" in names
    assert all(names)


def test_only_an_unspecified_address_is_a_wildcard_bind() -> None:
    assert is_wildcard("0.0.0.0")  # noqa: S104
    assert is_wildcard("::")
    assert not is_wildcard("127.0.0.1")
    assert not is_wildcard("192.0.2.7")
    assert not is_wildcard("localhost")


def test_while_the_database_is_unreachable_the_page_says_so() -> None:
    """The page and its JSON carry the source's "database unreachable: ..." line."""
    down = dataclasses.replace(page(), database_error="database unreachable: connection refused")
    client = client_of(make_app(ScriptedSource([down]), token=TOKEN), bearer=True)
    assert "database unreachable: connection refused" in client.get("/").text
    assert client.get("/api/status").json()["database_error"] == (
        "database unreachable: connection refused"
    )
    up = client_of(make_app(ScriptedSource([page()]), token=TOKEN), bearer=True)
    assert "database unreachable" not in up.get("/").text
    assert up.get("/api/status").json()["database_error"] is None


def live_with(holds: HarnessHolds) -> str:
    """The live part of a page whose daemon, "night", started two hours ago holds ``holds``."""
    state = DaemonState(
        daemon=DaemonProcess("night", 4242, NOW - timedelta(hours=2)),
        updated_at=NOW,
        stopping=False,
        polls=(),
        running=(),
        holds=holds,
        rate_limit_remaining=4999,
    )
    shown = dataclasses.replace(page(), daemon=state)
    client = client_of(make_app(ScriptedSource([shown]), token=TOKEN, port=8765), bearer=True)
    return str(client.get("/live").text)


def test_the_daemon_line_names_the_daemon_its_process_and_when_it_started() -> None:
    html = live_with(HarnessHolds())
    assert "Daemon night (pid 4242), since 10:00:00 UTC." in html
    assert "DaemonProcess(" not in html
    assert "data-missing-harness" not in html


def test_a_harness_whose_cli_is_gone_is_shown_holding_the_runs_back() -> None:
    gone = HarnessHolds(missing=(MissingHarness("claude", "claude is gone; run install"),))
    assert (
        "No Run starts until the claude Harness is back: claude is gone; run install."
        in live_with(gone)
    )


def test_a_run_that_ended_between_the_two_reads_is_shown_ended_only() -> None:
    """The page reads the running Runs, then the latest: Run 2 ended in between, so it is in
    both reads; it is shown with its outcome and not in flight beside it."""
    one, two_running, two_ended = run(1, "running").run, run(2, "running").run, run(2, "succeeded")
    in_flight, ended = in_flight_and_ended([one, two_running], [two_ended.run, one])

    assert [r.id for r in in_flight] == [1]
    assert [(r.id, r.state) for r in ended] == [(2, "succeeded")]
