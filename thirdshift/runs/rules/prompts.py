"""The Session prompts of a Run. Agents report back only through git and files thirdshift
names, never through prose thirdshift must parse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template

from thirdshift.defang import defanged_title, pull_request_body
from thirdshift.issue_url import IssueRef
from thirdshift.records import Comment, IssueInfo, IssueSummary
from thirdshift.scrub import Scrubber
from thirdshift.sessions.preamble import before_prompt

PULL_REQUEST_FILE = ".thirdshift-pull-request.md"


def pull_request_text(
    text: str, ref: IssueRef, scrub: Scrubber, run_page: str | None = None
) -> tuple[str, str]:
    """The title and body of the Pull request file the agent wrote, defanged, with
    thirdshift's one ``Closes #n`` and, given ``run_page``, its link to the Run's page."""
    first, _, rest = text.strip().partition("\n")
    title = first.lstrip("# ").strip() or f"Fix #{ref.number}"
    # Scrubbed first: a zero-width space inside a secret would hide it from the scrubber.
    return (
        defanged_title(scrub(title), ref.full_name),
        with_run_page(pull_request_body(scrub(rest.strip()), ref.number, ref.full_name), run_page),
    )


def fallback_pull_request(ref: IssueRef, run_page: str | None = None) -> tuple[str, str]:
    """The title and body of a pull request whose session wrote no Pull request file."""
    return f"Fix #{ref.number}", with_run_page(f"Closes #{ref.number}", run_page)


def with_run_page(body: str, run_page: str | None) -> str:
    """A pull request's body as thirdshift publishes it, with a last line linking the page of
    the Run that wrote it (``run_page``, from ``public_url``); unchanged without one. Added
    after defanging: it is thirdshift's own line."""
    if run_page is None:
        return body
    return f"{body}\n\nThe Run behind this pull request, on thirdshift's status page: {run_page}"


@dataclass(frozen=True)
class FailedCheck:
    name: str
    log_tail: str


# A prompt travels as one argv element, which Linux caps at 128 KiB of bytes (not characters:
# a non-ASCII issue body can be three times its length in bytes). Budgets are in UTF-8 bytes.
BODY_BYTES = 48_000
DISCUSSION_BYTES = 32_000
CHECK_LOGS_BYTES = 48_000
TRUSTED_ROLES = frozenset({"admin", "maintain", "write", "triage"})


def cut_bytes(text: str, limit: int, marker: str) -> str:
    """``text`` within ``limit`` bytes of UTF-8, cut at a line boundary when one is near (else
    at a character boundary), with ``marker`` on a line of its own when anything was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    head = data[: max(0, limit - len(marker.encode()) - 2)].decode("utf-8", "ignore")
    newline = head.rfind("\n")
    if newline > len(head) // 2:
        head = head[:newline]
    return f"{head}\n{marker}"


def trusted_comments(
    comments: Sequence[Comment], roles: Mapping[str, str]
) -> tuple[tuple[Comment, ...], int]:
    """The comments whose authors hold triage, write, maintain or admin on the repository
    (``roles`` maps a login to its role), and how many others were left out: on a public
    repository anyone may comment, and a stranger's words must not steer the agent."""
    kept = tuple(c for c in comments if roles.get(c.author, "none") in TRUSTED_ROLES)
    return kept, len(comments) - len(kept)


def _discussion(comments: Sequence[Comment], left_out: int) -> str:
    kept: list[str] = []
    used = 0
    for comment in reversed(comments):
        text = f"\n--- comment by {comment.author}:\n{comment.body.strip()}\n"
        size = len(text.encode())
        if used + size > DISCUSSION_BYTES:
            kept.append(f"\n[{len(comments) - len(kept)} earlier comment(s) left out]\n")
            break
        kept.append(text)
        used += size
    strangers = (
        f"\n[{left_out} comment(s) by people without triage or write permission on this "
        "repository are left out]\n"
        if left_out
        else ""
    )
    return "".join(reversed(kept)) + strangers


def implement_prompt(
    issue: IssueInfo,
    comments: Sequence[Comment],
    *,
    left_out: int = 0,
    base_branch: str,
    issue_branch: str,
    continuation: bool,
    pull_request_url: str | None,
    earlier: str = "",
) -> str:
    discussion = _discussion(comments, left_out)
    body = cut_bytes(issue.body.strip(), BODY_BYTES, "[the rest of the issue is left out]")
    if continuation:
        situation = (
            f"The branch {issue_branch} already holds work from an earlier Run on this issue"
            + (f" (pull request {pull_request_url})" if pull_request_url else "")
            + ". Read its commits first and build on them; do not start over."
        )
    else:
        situation = f"You are on a new branch {issue_branch}, made from {base_branch}."
    # What came before opens the prompt, as in a Repair's, so the request follows it.
    before = f"{earlier.strip()}\n\n" if continuation and earlier.strip() else ""
    return before_prompt(
        before,
        f"""You are working unattended on issue #{issue.number} of this repository.

The request, as issue #{issue.number} states it (title and body by {issue.author}):
Issue #{issue.number}: {issue.title}

{body}
{discussion}
{situation}

Do this, in order:
1. Implement what the issue asks, with tests that prove it.
2. Run the project's tests and checks, in the foreground, and make them pass.
3. Review your own diff against {base_branch} and fix what you find.
4. Commit your work on {issue_branch} with clear messages. Do not push: thirdshift pushes.
5. Write the pull request into the file {PULL_REQUEST_FILE} at the repository root (git
   ignores it): its first line is the title, then a blank line, then the body. The body says
   what changed and why, contains the line "Closes #{issue.number}", and lists any review
   findings you chose not to address, with your reasons.

Never end your turn while a command you started is still running.
""",
    )


def conflict_prompt(
    preamble: str, *, base_branch: str, issue_branch: str, paths: Sequence[str]
) -> str:
    listed = "\n".join(f"- {path}" for path in paths)
    return before_prompt(
        preamble,
        f"""Merging origin/{base_branch} into {issue_branch} stopped with conflicts in:
{listed}

The merge is in progress in this working tree. Resolve every conflict keeping the intent of
both sides, run the tests in the foreground, then finish the merge with `git commit --no-edit`.
Do not rebase, do not abort the merge, do not push.
""",
    )


def ci_fix_prompt(
    preamble: str,
    *,
    head: str,
    failed: Sequence[FailedCheck],
    inherited: Sequence[str],
    pull_request_file: str = PULL_REQUEST_FILE,
) -> str:
    checks = cut_bytes(
        "\n\n".join(
            f"Check '{check.name}' failed. The end of its log:\n```\n{check.log_tail.strip()}\n```"
            for check in failed
        ),
        CHECK_LOGS_BYTES,
        "[the logs of further checks are left out]",
    )
    not_ours = (
        "\nThese checks also fail on the Base branch and are not yours to fix: "
        + ", ".join(inherited)
        + "\n"
        if inherited
        else ""
    )
    return before_prompt(
        preamble,
        f"""CI is red on {head[:7]} of this branch.

{checks}
{not_ours}
Find the cause, fix it, run the failing checks' commands in the foreground until they pass, and
commit the fix. If nothing on this branch can fix it, change nothing. Do not push. If the pull
request's description in {pull_request_file} needs updating, update that file.
""",
    )


def foreign_review_prompt(
    preamble: str, *, issue_number: int, issue_branch: str, commits: Sequence[str]
) -> str:
    """A review Repair of the commits people pushed to the Issue branch during the Run: they
    are merged in already (never rebased, never overwritten); the session reviews them."""
    listed = "\n".join(f"- {commit}" for commit in commits)
    return f"""{preamble}While this Run worked, people pushed these commits to {issue_branch};
thirdshift merged them in (it never rebases or overwrites them):
{listed}

Review each against issue #{issue_number} and the work on this branch (`git show <sha>`). Keep
what serves the issue. Where a commit breaks the tests or works against what the issue asks, fix
it with a commit of your own, and say why in {PULL_REQUEST_FILE} (the whole pull request: title,
a blank line, the body); never revert a person's commit silently. Run the tests in the
foreground. Commit what you change. Do not push. If nothing needs changing, change nothing.
"""


ARCHITECT_TITLES_BYTES = 24_000  # per list: the issue lists never crowd out the instructions


def _issue_lines(issues: Sequence[IssueSummary]) -> str:
    if not issues:
        return "(none)"
    lines = [
        f"- #{issue.number} {issue.title[:120]}"
        + (f" [{', '.join(issue.labels)}]" if issue.labels else "")
        for issue in issues
    ]
    return cut_bytes("\n".join(lines), ARCHITECT_TITLES_BYTES, "[older issues left out]")


def architect_prompt(
    *,
    repository: str,
    base: str,
    base_sha: str,
    focus: str | None,
    open_issues: Sequence[IssueSummary],
    closed_issues: Sequence[IssueSummary],
    result_file: str,
    max_tickets: int,
) -> str:
    """The ``architect`` session's prompt (package data, ``rules/architect.md``): the
    repository's open and recently closed issues by number and title, bounded, and the result
    file it must end with."""
    template = Template(
        resources.files("thirdshift.runs.rules").joinpath("architect.md").read_text("utf-8")
    )
    return template.substitute(
        repository=repository,
        base=base,
        base_sha=base_sha,
        focus=(
            f"\nLook first at what a person asked you to focus on: {focus.strip()}\n"
            if focus and focus.strip()
            else ""
        ),
        open_issues=_issue_lines(open_issues),
        closed_issues=_issue_lines(closed_issues),
        result_file=result_file,
        max_tickets=max_tickets,
    )


SPEC_REVIEW = "spec-review"
"""The kind of the session that reviews a Spec branch before its Spec PR is marked ready."""


def spec_review_prompt(
    preamble: str, *, spec: int, base_branch: str, spec_branch: str, tickets: Sequence[int]
) -> str:
    """The Spec review's prompt: ``preamble`` (the Spec and every Ticket's outcome, from
    thirdshift's records), then what to do: review the Spec branch as a whole against the Base
    branch and the Spec, fix what it finds, and write the Spec PR's text."""
    listed = ", ".join(f"#{n}" for n in tickets) or "none"
    return before_prompt(
        f"{preamble.strip()}\n\n" if preamble.strip() else "",
        f"""You are working unattended on the Spec review of issue #{spec} of this repository.

You are on the branch {spec_branch}, where each of its Tickets ({listed}) landed through a pull
request of its own, on top of {base_branch}.

Do this, in order:
1. Review the whole diff of {spec_branch} against {base_branch}: does it do what Spec #{spec}
   asks, do the Tickets' changes fit together, is anything missing, duplicated or left half
   done?
2. Fix what you find, with tests, and make the project's tests and checks pass (in the
   foreground).
3. Commit your fixes on {spec_branch} with clear messages. Do not push: thirdshift pushes.
4. Write the Spec PR's text into the file {PULL_REQUEST_FILE} at the repository root (git
   ignores it): its first line is the title, then a blank line, then the body. The body says
   what the Spec's changes do as a whole and what your review found and fixed. thirdshift adds
   the Tickets' checklist and the line closing the Spec itself.

Never end your turn while a command you started is still running.
""",
    )
