"""What marks a Base fix (adr/0021): the issue thirdshift opens for checks red on the Base
branch, found again by its hidden marker, and the text it asks with."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thirdshift.defang import defanged
from thirdshift.errors import ThirdshiftError
from thirdshift.records import IssueInfo
from thirdshift.runs.rules.repair_loop import InheritedFailure
from thirdshift.runs.rules.roles import same_login

BASE_FIX_MARKER_PREFIX = "<!-- thirdshift:base-fix:"


def base_fix_marker(base: str, checks: Sequence[str]) -> str:
    """The hidden mark of the Base fix issue for ``checks`` red on ``base``."""
    names = ",".join(sorted(checks)).replace("--", "- -")
    return f"{BASE_FIX_MARKER_PREFIX}{base}:{names} -->"


def base_fix_body(
    base: str, failure: InheritedFailure, marker: str, repository: str | None = None
) -> str:
    """What the Base fix issue asks: make the named checks pass on the Base branch. The same
    for every Run that meets these checks, so a retried opening finds its own issue."""
    listed = "\n".join(f"- `{name}`" for name in sorted(failure.checks))
    # Check names are whatever CI (and an agent's workflow) called them: defanged like any
    # agent text, all but the marker thirdshift finds the issue by.
    return (
        defanged(
            f"These checks fail on `{base}` at `{failure.base_sha[:7]}`, so every pull request "
            f"into `{base}` inherits them:\n\n{listed}\n\nMake them pass on `{base}` without "
            "changing what they check. The issues that met them wait for this fix (they are "
            "blocked by this issue). thirdshift runs it as a Merge run: once its CI is green it "
            "merges it."
        )
        + f"\n\n{marker}"
    )


def is_base_fix(issue: IssueInfo, own_login: Callable[[], str]) -> bool:
    """Whether ``issue`` is a Base fix: one thirdshift opened, carrying its marker (a
    person's issue quoting the marker is an issue like any other)."""
    if BASE_FIX_MARKER_PREFIX not in issue.body:
        return False
    try:
        return same_login(issue.author, own_login())
    except ThirdshiftError:
        return False
