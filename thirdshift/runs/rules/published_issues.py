"""The issues an Architect run publishes, as pure rules: each issue's text in the shape of a
good Ticket, with the hidden marker that makes publishing idempotent (a retry finds every issue
it already opened by its marker and opens only the rest) and carries the kept result's digest
(``kept_mismatch`` holds a kept result against it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from thirdshift.runs.rules.plans import (
    TRIAGE_LABEL,
    Covered,
    Draft,
    Idea,
    Result,
    result_digest,
    sections,
)

_MARKER = re.compile(
    r"<!-- thirdshift:architect plan=([0-9a-f]+) part=([a-z0-9-]+)(?: digest=([0-9a-f]{64}))? -->"
)


@dataclass(frozen=True)
class Marker:
    """What thirdshift's hidden line in a published issue says: the plan, the part, and the
    digest of the kept result it was published from (None on a marker without one)."""

    key: str
    part: str
    digest: str | None


def marker(key: str, part: str, digest: str) -> str:
    """The hidden line that names one issue of a plan: ``part`` is ``spec``, ``ticket-<i>`` or
    ``idea``; ``digest`` is ``result_digest`` of the kept result it is published from."""
    return f"<!-- thirdshift:architect plan={key} part={part} digest={digest} -->"


def plan_marker(body: str, key: str | None = None) -> Marker | None:
    """The marker of an issue body (of plan ``key`` when given), or None. The last one counts:
    thirdshift writes its own at the very end, after everything the session wrote."""
    found = [
        Marker(m.group(1), m.group(2), m.group(3))
        for m in _MARKER.finditer(body)
        if key is None or m.group(1) == key
    ]
    return found[-1] if found else None


def marked_part(body: str, key: str) -> str | None:
    """The part of plan ``key`` an issue body is marked as, or None."""
    found = plan_marker(body, key)
    return found.part if found else None


def plan_parts(bodies: Mapping[int, str], key: str) -> dict[str, int]:
    """The issues of plan ``key`` among ``bodies`` (number to body, as listed), by part: the
    first listed of each part."""
    parts: dict[str, int] = {}
    for number, body in bodies.items():
        part = marked_part(body, key)
        if part is not None:
            parts.setdefault(part, number)
    return parts


def kept_mismatch(
    kept: str, key: str, bodies: Mapping[int, str], recorded: Sequence[int]
) -> str | None:
    """What a kept result (``kept``, of plan ``key``) does not match on GitHub, or None. Every
    issue marked with its plan key must carry its digest (a marker without one does not
    vouch for it), and every issue its Run recorded as published (``recorded``) that carries
    a marker must carry its plan key: a row rewritten after publishing shows here."""
    digest = result_digest(kept)
    for number, body in sorted(bodies.items()):
        found = plan_marker(body, key)
        if found is None:
            continue
        if found.digest is None:
            return f"the marker on #{number} carries no digest"
        if found.digest != digest:
            return f"digest differs from the marker on #{number}"
    for number in recorded:
        other = plan_marker(bodies.get(number, ""))
        if other is not None and other.key != key:
            return f"plan key differs from the marker on #{number}"
    return None


@dataclass(frozen=True)
class PlanPart:
    """Where an issue stands in its plan: the plan's key, the part (``spec``, ``ticket-<i>``
    or ``idea``) and the digest of the kept result it is published from."""

    key: str
    part: str
    digest: str


@dataclass(frozen=True)
class Reviewed:
    """What the Architect run that proposed an issue reviewed: its id, the Base branch and the
    head it reviewed."""

    run_id: int
    base: str
    base_sha: str


def issue_text(
    draft: Draft,
    *,
    place: PlanPart,
    reviewed: Reviewed,
    kind: str,
    blockers: Sequence[int] = (),
    spec_number: int | None = None,
) -> str:
    """The body of one published issue. ``kind`` says what it is (a Spec, a Ticket, an
    Architect idea) in the footer that tells a person what thirdshift expects of them."""
    parts = [sections(draft)]
    if place.part.startswith("ticket-"):
        said = ", ".join(f"#{n}" for n in blockers) if blockers else "nothing"
        parts.append(f"Blocked by: {said}.")
    if spec_number is not None:
        parts.append(f"A Ticket of #{spec_number}.")
    parts.append(
        f"---\n_{kind} proposed by thirdshift's Architect run {reviewed.run_id}, which reviewed "
        f"{reviewed.base} at {reviewed.base_sha[:12]}. It waits for triage: a person takes "
        f"{TRIAGE_LABEL} off (and adds the Ready label to a Ticket) before any agent works on "
        "it._\n\n" + marker(place.key, place.part, place.digest)
    )
    return "\n\n".join(parts)


def published_line(result: Result, numbers: Sequence[int], urls: Sequence[str]) -> str:
    """The last progress line of an Architect run that published (or found it covered)."""
    if isinstance(result, Covered):
        return (
            f"covered by #{result.issue_number}: the best opportunity is already an issue "
            f"({urls[0]}); nothing was published"
        )
    if isinstance(result, Idea):
        return f"published the Architect idea #{numbers[0]} ({urls[0]}) for triage"
    if result.spec is None:
        return f"published the Architect plan #{numbers[0]}, one Ticket ({urls[0]}), for triage"
    tickets = ", ".join(f"#{n}" for n in numbers[1:])
    return f"published the Architect plan: Spec #{numbers[0]} ({urls[0]}) with Tickets {tickets}"
