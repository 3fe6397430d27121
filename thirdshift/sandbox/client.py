"""A small typed client for the GitHub stand-in's scenario control (``/_sandbox/``).

Standard library only. Give it the stand-in's ``api_url`` (``http://HOST:PORT/api/v3``) or its
bare ``http://HOST:PORT``; every method raises :class:`SandboxError` naming the request when
the stand-in refuses or cannot be reached.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thirdshift.errors import SandboxError

__all__ = ["CheckRunSummary", "SandboxClient"]


@dataclass(frozen=True)
class CheckRunSummary:
    """One check run as the stand-in reports it for a commit."""

    name: str
    status: str
    conclusion: str | None


class SandboxClient:
    """Sets up and inspects a running GitHub stand-in."""

    def __init__(self, api_url: str, timeout: float = 30.0) -> None:
        base = api_url.rstrip("/")
        self.web_url = base.removesuffix("/api/v3")
        self.timeout = timeout

    def add_user(
        self,
        login: str,
        token: str,
        permissions: dict[str, str],
        scopes: list[str] | None = None,
    ) -> None:
        """Register ``login`` with ``token``; ``permissions`` maps ``owner/name`` to a role
        (``read``, ``triage``, ``write``, ``maintain`` or ``admin``). The token is a classic
        one with ``scopes`` (``repo`` when not given)."""
        user: dict[str, object] = {"login": login, "token": token, "permissions": permissions}
        if scopes is not None:
            user["scopes"] = scopes
        self._send("POST", "/users", user)

    def add_app(
        self, slug: str, public_key: str, repositories: list[str], token_seconds: float = 3600
    ) -> int:
        """Register a GitHub App (``public_key`` in PEM) installed on the accounts owning
        ``repositories``, with write access there; its installation tokens last
        ``token_seconds``. Returns the App's id."""
        answer = self._send(
            "POST",
            "/apps",
            {
                "slug": slug,
                "public_key": public_key,
                "repositories": repositories,
                "token_seconds": token_seconds,
            },
        )
        return int(answer["id"])

    def add_repo(
        self, owner: str, name: str, source_dir: Path, checks: dict[str, str] | None = None
    ) -> str:
        """Create ``owner/name`` from ``source_dir`` (first commit on main) with CI ``checks``
        (check name -> shell command). Returns the first commit's sha."""
        answer = self._send(
            "POST",
            "/repos",
            {
                "owner": owner,
                "name": name,
                "source_dir": str(source_dir),
                "checks": checks or {},
            },
        )
        return str(answer["sha"])

    def fail_next_merges(
        self,
        full_name: str,
        count: int = 1,
        status: int = 405,
        message: str = "Pull Request is not mergeable",
    ) -> None:
        """Make the next ``count`` merges of ``owner/name`` fail with that GitHub error."""
        self._send(
            "POST",
            "/merge-failures",
            {
                "repo": full_name,
                "count": count,
                "status": status,
                "message": message,
            },
        )

    def inject_faults(
        self,
        error_rate: float = 1.0,
        statuses: tuple[int, ...] = (500,),
        rate_limit_403: bool = False,
        delay_ms: int = 0,
        seed: int | None = None,
        count: int | None = None,
    ) -> None:
        """Make REST requests fail at ``error_rate`` with one of ``statuses`` (or a rate-limit
        403), at most ``count`` times, each answer delayed by ``delay_ms``."""
        self._send(
            "POST",
            "/faults",
            {
                "error_rate": error_rate,
                "statuses": list(statuses),
                "rate_limit_403": rate_limit_403,
                "delay_ms": delay_ms,
                "seed": seed,
                "count": count,
            },
        )

    def clear_faults(self) -> None:
        """Serve every REST request normally again."""
        self._send("DELETE", "/faults")

    def requests(self) -> list[dict[str, Any]]:
        """Every REST and GraphQL request served so far: method, path, query, status, login."""
        answer = self._send("GET", "/requests")
        return list(answer) if isinstance(answer, list) else []

    def check_runs(self, owner: str, name: str, sha: str) -> tuple[bool, list[CheckRunSummary]]:
        """Whether the CI is idle for ``sha``, and its latest check runs."""
        answer = self._send("GET", f"/checks/{owner}/{name}/{sha}")
        runs = [
            CheckRunSummary(r["name"], r["status"], r["conclusion"]) for r in answer["check_runs"]
        ]
        return bool(answer["idle"]), runs

    def wait_for_checks(
        self, owner: str, name: str, sha: str, timeout: float = 60.0
    ) -> list[CheckRunSummary]:
        """Poll until every check run for ``sha`` has completed; return them. Raises
        ``SandboxError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            idle, runs = self.check_runs(owner, name, sha)
            if idle:
                return runs
            if time.monotonic() >= deadline:
                raise SandboxError(
                    f"the checks of {owner}/{name} at {sha[:12]} did not complete within "
                    f"{timeout:g} s; raise the timeout or look at the job logs"
                )
            time.sleep(0.05)

    def _send(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        url = f"{self.web_url}/_sandbox{path}"
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http only
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise SandboxError(
                f"the GitHub stand-in refused {method} {path} ({exc.code}): {detail}"
            ) from exc
        except OSError as exc:
            raise SandboxError(
                f"cannot reach the GitHub stand-in at {self.web_url} ({exc}); is it running?"
            ) from exc
        return json.loads(body) if body else None
