"""Architect runs as pure rules: the result file an ``architect`` session leaves (the gates
are in ``plan_gate``, the issues thirdshift publishes from it in ``plan_issues``).

The session writes one JSON file (``ARCHITECT_RESULT_FILE``) naming its outcome: a plan (a Spec
with Tickets, or one Ticket), an idea, or the open or closed issue that already covers its best
opportunity. ``parse_result`` checks it strictly and says what is wrong in words the session's
prompt also uses; ``issue_text`` renders each issue in the shape of a good Ticket (why, what to
build, acceptance, blocked by, decisions taken) with the marker that makes publishing
idempotent: a retry finds every issue it already opened by its marker and opens only the rest.
The marker also carries the kept result's digest, and ``kept_mismatch`` holds a kept result
against it: a retry publishes only what the first run published from.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from thirdshift.defang import defanged
from thirdshift.errors import ThirdshiftError

ARCHITECT_RESULT_FILE = ".thirdshift-architect.json"
PLAN_LABEL = "architect-plan"
IDEA_LABEL = "architect-idea"
TRIAGE_LABEL = "needs-triage"
LABEL_COLORS = {PLAN_LABEL: "5319e7", IDEA_LABEL: "c5def5", TRIAGE_LABEL: "fbca04"}
LABEL_WORDS = {
    PLAN_LABEL: "Proposed by a thirdshift Architect run",
    IDEA_LABEL: "An idea of a thirdshift Architect run, not yet a plan",
    TRIAGE_LABEL: "Waits for a person to triage it",
}
TITLE_CHARS = 200  # GitHub allows 256; a title longer than this is a body in disguise
TEXT_CHARS = 12_000  # per section
BODY_CHARS = 40_000  # a whole rendered body: well inside GitHub's 65,536, footer and all
LIST_ITEMS = 40  # acceptance checks, or decisions, of one issue
RESULT_BYTES = 256 * 1024
_PLAN_KEY = re.compile(r"[0-9a-f]{1,64}")


class ResultInvalid(ThirdshiftError):
    """The result file is missing or does not say what its prompt asks for."""


@dataclass(frozen=True)
class Draft:
    """One issue of a plan (or an idea) as the session wrote it."""

    title: str
    why: str
    what_to_build: str
    acceptance: tuple[str, ...]
    decisions: tuple[str, ...] = ()
    blocked_by: tuple[int, ...] = ()  # 1-based positions of earlier Tickets of the same plan


@dataclass(frozen=True)
class Plan:
    """A Spec with two or more Tickets, or (``spec`` None) one Ticket."""

    spec: Draft | None
    tickets: tuple[Draft, ...]


@dataclass(frozen=True)
class Idea:
    draft: Draft


@dataclass(frozen=True)
class Covered:
    issue_number: int


Result = Plan | Idea | Covered


# -- the result file --------------------------------------------------------------------------


def parse_result(text: str | None, *, max_tickets: int) -> Result:
    """The session's outcome, or ``ResultInvalid`` naming what is wrong (``text`` None: the
    file is missing)."""
    name = ARCHITECT_RESULT_FILE
    if text is None:
        raise ResultInvalid(
            f"the architect session left no {name} in its Worktree; its prompt asks it to end "
            "by writing one"
        )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResultInvalid(
            f"{name} is not JSON (line {error.lineno} column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(data, dict):
        raise ResultInvalid(f"{name} must hold one JSON object, not {_kind(data)}")
    outcome = data.get("outcome")
    if outcome == "plan":
        _keys(data, "the plan", {"outcome", "tickets"}, {"spec"})
        return _plan(data, max_tickets)
    if outcome == "idea":
        _keys(
            data,
            "the idea",
            {"outcome", "title", "why", "what_to_build"},
            {"decisions", "acceptance"},
        )
        return Idea(_draft(data, "the idea", ticket=False))
    if outcome == "covered":
        _keys(data, "a covered outcome", {"outcome", "issue"}, set())
        number = data["issue"]
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ResultInvalid(
                f'{name}: "issue" must be the number of the issue that covers it, like 12'
            )
        return Covered(number)
    raise ResultInvalid(
        f'{name}: "outcome" must be "plan", "idea" or "covered", not {json.dumps(outcome)}'
    )


def _plan(data: Mapping[str, Any], max_tickets: int) -> Plan:
    tickets = data["tickets"]
    if not isinstance(tickets, list) or not tickets:
        raise ResultInvalid(f'{ARCHITECT_RESULT_FILE}: "tickets" must be a list of 1 or more')
    if len(tickets) > max_tickets:
        raise ResultInvalid(
            f"{ARCHITECT_RESULT_FILE}: the plan has {len(tickets)} Tickets and "
            f"architect_max_tickets is {max_tickets}; a plan that big is several plans"
        )
    spec_data = data.get("spec")
    spec = None
    if spec_data is not None:
        spec = _draft(spec_data, "the spec", ticket=False)
        if len(tickets) < 2:
            raise ResultInvalid(
                f"{ARCHITECT_RESULT_FILE}: a spec needs 2 or more Tickets; one Ticket is a plan "
                'without "spec"'
            )
    elif len(tickets) > 1:
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {len(tickets)} Tickets need a "spec" that holds them'
        )
    drafts = []
    for index, ticket in enumerate(tickets, start=1):
        where = f"Ticket {index}"
        draft = _draft(ticket, where, ticket=True)
        for blocker in draft.blocked_by:
            if not 1 <= blocker < index:
                raise ResultInvalid(
                    f'{ARCHITECT_RESULT_FILE}: {where}\'s "blocked_by" names {blocker}; it may '
                    f"name only earlier Tickets, 1 to {index - 1}"
                )
        drafts.append(draft)
    return Plan(spec, tuple(drafts))


def _draft(data: Any, where: str, *, ticket: bool) -> Draft:
    if not isinstance(data, dict):
        raise ResultInvalid(f"{ARCHITECT_RESULT_FILE}: {where} must be an object")
    required = {"title", "why", "what_to_build"} | ({"acceptance"} if ticket else set())
    optional = {"decisions", "blocked_by"} if ticket else {"decisions", "acceptance", "outcome"}
    _keys(data, where, required, optional)
    title = _text(data, "title", where, TITLE_CHARS)
    if "\n" in title:
        raise ResultInvalid(f'{ARCHITECT_RESULT_FILE}: {where}\'s "title" must be one line')
    blocked_by = data.get("blocked_by", [])
    if not isinstance(blocked_by, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in blocked_by
    ):
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {where}\'s "blocked_by" must be a list of Ticket '
            "positions, like [1]"
        )
    acceptance = _lines(data, "acceptance", where)
    if ticket and not acceptance:
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {where}\'s "acceptance" must list at least one check'
        )
    draft = Draft(
        title=title,
        why=_text(data, "why", where, TEXT_CHARS),
        what_to_build=_text(data, "what_to_build", where, TEXT_CHARS),
        acceptance=acceptance,
        decisions=_lines(data, "decisions", where),
        blocked_by=tuple(dict.fromkeys(blocked_by)),
    )
    size = len(sections(draft))
    if size > BODY_CHARS:
        raise ResultInvalid(
            f"{ARCHITECT_RESULT_FILE}: {where} would make an issue of {size} characters; at "
            f"most {BODY_CHARS}, so say it shorter"
        )
    return draft


def _keys(data: Mapping[str, Any], where: str, required: set[str], optional: set[str]) -> None:
    missing = sorted(required - set(data))
    if missing:
        raise ResultInvalid(f"{ARCHITECT_RESULT_FILE}: {where} lacks {', '.join(missing)}")
    unknown = sorted(set(data) - required - optional)
    if unknown:
        raise ResultInvalid(
            f"{ARCHITECT_RESULT_FILE}: {where} has unknown key(s) {', '.join(unknown)}"
        )


def _text(data: Mapping[str, Any], key: str, where: str, limit: int) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise ResultInvalid(f'{ARCHITECT_RESULT_FILE}: {where}\'s "{key}" must be text')
    if len(value) > limit:
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {where}\'s "{key}" has {len(value)} characters; at most '
            f"{limit}"
        )
    return value.strip()


def _lines(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ResultInvalid(f'{ARCHITECT_RESULT_FILE}: {where}\'s "{key}" must be a list of text')
    if len(value) > LIST_ITEMS:
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {where}\'s "{key}" has {len(value)} items; at most '
            f"{LIST_ITEMS}"
        )
    if sum(len(v) for v in value) > TEXT_CHARS:
        raise ResultInvalid(
            f'{ARCHITECT_RESULT_FILE}: {where}\'s "{key}" is longer than {TEXT_CHARS} characters'
        )
    return tuple(v.strip() for v in value)


def _kind(value: object) -> str:
    return {list: "a list", str: "text", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


# -- keeping the result in the Run's record ---------------------------------------------------


def new_plan_key() -> str:
    """A plan's key: random, so no plan of another database (a workflow's own SQLite, a
    database started afresh) ever shares a marker with this one."""
    return uuid.uuid4().hex


def scrubbed(result: Result, scrub: Callable[[str], str]) -> Result:
    """``result`` with every text the session wrote passed through ``scrub``: what is kept
    and what is published are the same, and neither holds a secret."""

    def clean(draft: Draft) -> Draft:
        return replace(
            draft,
            title=scrub(draft.title),
            why=scrub(draft.why),
            what_to_build=scrub(draft.what_to_build),
            acceptance=tuple(scrub(line) for line in draft.acceptance),
            decisions=tuple(scrub(line) for line in draft.decisions),
        )

    if isinstance(result, Idea):
        return Idea(clean(result.draft))
    if isinstance(result, Plan):
        return Plan(clean(result.spec) if result.spec else None, tuple(map(clean, result.tickets)))
    return result


def result_to_json(result: Result, key: str) -> str:
    """The result as the Run's record keeps it, with the plan's ``key``: a Run that completes
    a crashed publish publishes the same plan under the same markers."""
    if isinstance(result, Covered):
        body: dict[str, Any] = {"outcome": "covered", "issue": result.issue_number}
    elif isinstance(result, Idea):
        body = {"outcome": "idea", **_draft_json(result.draft)}
    else:
        body = {
            "outcome": "plan",
            "spec": _draft_json(result.spec) if result.spec else None,
            "tickets": [_draft_json(t, ticket=True) for t in result.tickets],
        }
    return json.dumps({"key": key, "result": body}, sort_keys=True)


def result_from_json(text: str, *, max_tickets: int) -> tuple[Result, str]:
    """The result and plan key ``result_to_json`` kept, checked as strictly as a fresh result
    file (``max_tickets`` and all): a Run's record is a row an agent could have written, so it
    earns no trust of its own. ``ResultInvalid`` when it does not read."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ResultInvalid(f"the kept Architect result is not JSON ({error})") from None
    if not isinstance(data, dict) or set(data) != {"key", "result"}:
        raise ResultInvalid(
            "the kept Architect result must be an object of exactly a key and a result"
        )
    key = data["key"]
    if not isinstance(key, str) or not _PLAN_KEY.fullmatch(key):
        raise ResultInvalid(f"the kept Architect result has no plan key: {key!r}")
    try:
        result = parse_result(json.dumps(data["result"]), max_tickets=max_tickets)
    except ResultInvalid as error:
        raise ResultInvalid(f"the kept Architect result is invalid: {error}") from None
    return result, key


def result_digest(kept: str) -> str:
    """The digest of a kept result's text (sha256, hex), which every issue published from it
    carries in its marker. GitHub is what no agent can write: a completing Run publishes from
    a kept result only if its digest is the one on the issues already published."""
    return hashlib.sha256(kept.encode()).hexdigest()


def _draft_json(draft: Draft, *, ticket: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "title": draft.title,
        "why": draft.why,
        "what_to_build": draft.what_to_build,
        "decisions": list(draft.decisions),
    }
    if ticket or draft.acceptance:
        body["acceptance"] = list(draft.acceptance)
    if ticket:
        body["blocked_by"] = list(draft.blocked_by)
    return body


def sections(draft: Draft) -> str:
    """The body's part the session wrote, as published (without the parts thirdshift adds)."""
    parts = [
        f"## Why\n\n{defanged(draft.why)}",
        f"## What to build\n\n{defanged(draft.what_to_build)}",
    ]
    if draft.acceptance:
        listed = "\n".join(f"- {defanged(line)}" for line in draft.acceptance)
        parts.append(f"## Acceptance\n\n{listed}")
    if draft.decisions:
        listed = "\n".join(f"- {defanged(line)}" for line in draft.decisions)
        parts.append(f"## Decisions taken\n\n{listed}")
    return "\n\n".join(parts)
