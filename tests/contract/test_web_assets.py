"""The status page's charting library is served from the package, exactly the file of the npm
package ``package.json`` pins, and nothing else of the file system is reachable through it."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from thirdshift.web import make_app
from thirdshift.web.app import STATIC
from thirdshift.web.page import Page
from thirdshift.web.run_page import LogDownload, RunPage

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-s3cret-token"


class NoPage:
    def page(self) -> Page:
        raise AssertionError("no page is asked for")

    def run_page(self, run_id: int) -> RunPage:
        raise AssertionError("no Run page is asked for")

    def session_log(self, run_id: int, session_id: int) -> LogDownload:
        raise AssertionError("no Session log is asked for")


def test_the_served_chart_library_is_the_pinned_npm_package_s_own_file() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["chart.js"]
    installed = ROOT / "node_modules" / "chart.js"
    assert json.loads((installed / "package.json").read_text())["version"] == pinned
    assert (STATIC / "chart.umd.min.js").read_bytes() == (
        installed / "dist" / "chart.umd.min.js"
    ).read_bytes()
    assert (STATIC / "chart.js.LICENSE.md").read_text() == (installed / "LICENSE.md").read_text()


def test_static_files_are_served_by_name_behind_the_token_and_nothing_else() -> None:
    app = make_app(NoPage(), token=TOKEN, port=8765)
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    assert client.get("/static/chart.umd.min.js").status_code == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    served = client.get("/static/chart.umd.min.js", headers=bearer)
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/javascript")
    assert served.content == (STATIC / "chart.umd.min.js").read_bytes()
    for name in ("..%2F__init__.py", "app.py", "%2Fetc%2Fpasswd", "chart.umd.min.js.map"):
        assert client.get(f"/static/{name}", headers=bearer).status_code == 404, name
