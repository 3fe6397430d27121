"""The GitHub stand-in with the standard scenario (one repository, users of every role), shared
by the stand-in's own tests (tests/sandbox) and the adapters' contract tests (tests/contract).

``sandbox`` starts a stand-in in ``tmp_path``, records every REST exchange, and at teardown
validates each one against GitHub's OpenAPI description: a response GitHub could not give fails
the test. tests/conftest.py registers this module as a plugin, so its fixtures are defined once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from github import Auth, Github

from tests.support.git_client import git_as
from tests.support.openapi import ContractViolation, OpenAPIDescription, description_path
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github.server import API_PREFIX, Exchange, GitHubStandIn

OWNER, NAME = "acme", "widgets"
FULL_NAME = f"{OWNER}/{NAME}"
TOKENS = {
    "ada": "ada-admin-token",
    "wes": "wes-write-token",
    "tia": "tia-triage-token",
    "rex": "rex-read-token",
    "olga": "olga-outsider-token",
}
ROLES = {"ada": "admin", "wes": "write", "tia": "triage", "rex": "read"}
CHECKS = {"lint": "test -f README.md", "test": "! grep -q broken app.py"}
INTEGRATION_REFUSED = "Resource not accessible by integration"


@pytest.fixture(scope="session")
def description() -> OpenAPIDescription:
    return OpenAPIDescription.load(description_path())


def out_of_contract(exchange: Exchange) -> bool:
    """Answers GitHub gives on any route without documenting them per operation: 304s,
    ``Bad credentials``, server errors, rate-limit refusals, the hourly one or a secondary
    limit's with its ``Retry-After`` (these only come from injected faults and limits), and the
    403 an installation token gets where its App was granted no permission. Their error bodies
    are still checked for GitHub's two fields."""
    global_answer = (
        exchange.status in (304, 401)
        or exchange.status >= 500
        or (exchange.status == 403 and exchange.header("X-RateLimit-Remaining") == "0")
        or (exchange.status == 403 and exchange.header("Retry-After") is not None)
        or (exchange.status == 403 and _message(exchange) == INTEGRATION_REFUSED)
    )
    if global_answer and exchange.status != 304:
        body = json.loads(exchange.response_body)
        assert isinstance(body["message"], str), body
        assert isinstance(body["documentation_url"], str), body
    return global_answer


def _message(exchange: Exchange) -> object:
    try:
        body = json.loads(exchange.response_body)
    except ValueError:
        return None
    return body.get("message") if isinstance(body, dict) else None


@dataclass
class Sandbox:
    """A started stand-in with the standard scenario, and what it recorded."""

    stand_in: GitHubStandIn
    client: SandboxClient
    workdir: Path
    main_sha: str
    exchanges: list[Exchange] = field(default_factory=list)

    def github(self, login: str = "ada", token: str | None = None) -> Github:
        """PyGithub as ``login``, with its retries off so every answer is seen."""
        auth = Auth.Token(token if token is not None else TOKENS[login])
        return Github(
            base_url=self.stand_in.api_url,
            auth=auth,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )

    def push(
        self, branch: str, files: dict[str, str], login: str = "wes", repo: str = FULL_NAME
    ) -> str:
        """Commit ``files`` on ``branch`` of ``repo`` (started from main when new) and push it
        as ``login``; return the new head sha."""
        clone = self.workdir / f"clone-{repo.replace('/', '-')}-{branch.replace('/', '-')}"

        def git(*args: str, cwd: Path = clone) -> str:
            return git_as(TOKENS[login], *args, cwd=cwd, login=login).stdout.strip()

        if not clone.exists():
            url = f"{self.stand_in.web_url}/{repo}.git"
            git("clone", "--quiet", url, str(clone), cwd=self.workdir)
        git("fetch", "--quiet", "origin")
        start = git("branch", "--remotes", "--list", f"origin/{branch}") or "origin/main"
        git("checkout", "--quiet", "-B", branch, start.strip())
        for path, text in files.items():
            (clone / path).write_text(text)
        git("add", "--all")
        git("commit", "--quiet", "-m", f"Change on {branch}")
        git("push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        return git("rev-parse", "HEAD")


@pytest.fixture
def sandbox(tmp_path: Path, description: OpenAPIDescription) -> Iterator[Sandbox]:
    source = tmp_path / "source"
    source.mkdir()
    (source / "README.md").write_text("# widgets\n")
    (source / "app.py").write_text("print('hello')\n")
    recorded: list[Exchange] = []
    stand_in = GitHubStandIn(tmp_path / "stand-in", on_exchange=recorded.append)
    stand_in.start()
    try:
        client = SandboxClient(stand_in.api_url)
        sha = client.add_repo(OWNER, NAME, source, CHECKS)
        for login, token in TOKENS.items():
            role = ROLES.get(login)
            client.add_user(login, token, {FULL_NAME: role} if role else {})
        yield Sandbox(stand_in, client, tmp_path, sha, recorded)
    finally:
        stand_in.stop()
    violations = []
    for exchange in recorded:
        if not exchange.path.startswith(API_PREFIX) or out_of_contract(exchange):
            continue
        try:
            description.validate_exchange(
                exchange.method,
                exchange.path.removeprefix(API_PREFIX),
                exchange.status,
                exchange.response_body,
                exchange.header("Content-Type"),
            )
        except ContractViolation as violation:
            violations.append(str(violation))
    if violations:
        pytest.fail("responses GitHub could not give:\n" + "\n".join(violations))
