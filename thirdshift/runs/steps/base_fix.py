"""The Base fix (adr/0021): checks red on the Base branch are no Run's own failure; thirdshift
opens one issue to fix them as a Merge run (found again by its marker, never opened twice),
and makes it a blocker of the issue that met them. A Ticket Run's Base branch is its Spec
branch: its Base fix becomes a Ticket of the Spec, which the Spec run runs into it (adr/0032)."""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.defang import defanged_title
from thirdshift.errors import ThirdshiftError
from thirdshift.records import IssueInfo
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.base_fixes import base_fix_body, base_fix_marker
from thirdshift.runs.rules.label_looks import MERGE_LOOK
from thirdshift.runs.rules.repair_loop import InheritedFailure
from thirdshift.runs.rules.roles import same_login
from thirdshift.runs.scope import RunScope, Say
from thirdshift.settings import Settings


@dataclass(frozen=True)
class BaseFixStep:
    settings: Settings
    say: Say

    def open(self, scope: RunScope, failure: InheritedFailure) -> IssueInfo | None:
        """The Base fix issue for the checks red on the Base branch (one per branch and set
        of checks: an open one is found again by its marker, never opened twice), labelled to
        run as a Merge run, and made a blocker of this issue. None, with a warning, when GitHub
        would not have it: the Failed run still says what to do by hand."""
        base, gh, ref = scope.base, scope.github, scope.ref
        checks = ", ".join(sorted(failure.checks))
        spec = scope.request.spec_number
        if base != scope.found.repo.default_branch and spec is None:
            # The daemon runs a Base fix against the default branch, a Spec run against its
            # Spec branch; another base is a person's to fix.
            return None
        try:
            issue = self._found_or_opened(scope, failure, checks)
        except ThirdshiftError as problem:
            self.say(f"warning: could not open an issue to fix {checks} on {base}: {problem}")
            return None
        if issue is None:
            return None
        if spec is not None:
            # A Ticket of the Spec: its Spec run runs it into the Spec branch, once, and the
            # Tickets it blocks after it.
            try:
                gh.add_sub_issue(ref.owner, ref.repo, spec, issue.number)
            except ThirdshiftError as problem:
                self.say(f"warning: could not make {issue.html_url} a Ticket of #{spec}: {problem}")
                return None
        try:
            gh.block_issue(ref.owner, ref.repo, ref.number, issue.number)
        except ThirdshiftError as problem:
            self.say(
                f"warning: could not mark #{ref.number} blocked by {issue.html_url}: {problem}"
            )
        return issue

    def _found_or_opened(
        self, scope: RunScope, failure: InheritedFailure, checks: str
    ) -> IssueInfo | None:
        base, gh, ref = scope.base, scope.github, scope.ref
        marker = base_fix_marker(base, failure.checks)
        me = gh.authenticated_login()
        earlier = self._existing(gh, scope, marker, me)
        if any(i.state != "open" for i in earlier) and not any(i.state == "open" for i in earlier):
            # A person closed the Base fix for these checks: theirs to decide, not again.
            closed = next(i for i in earlier if i.state != "open")
            self.say(
                f"a Base fix for {checks} on {base} was closed ({closed.html_url}); "
                "thirdshift opens no other"
            )
            return None
        issue = next((i for i in earlier if i.state == "open"), None)
        if issue is not None:
            return issue
        ready, merge = self.settings.ready_label, self.settings.merge_label
        gh.ensure_label(ref.owner, ref.repo, merge, MERGE_LOOK.color, MERGE_LOOK.description)
        # A Spec branch's Base fix is its Spec run's to run (Ready, a daemon would run it
        # into the default branch once the Spec run ended).
        labels = [merge] if scope.request.spec_number is not None else [ready, merge]
        issue = gh.open_issue(
            ref.owner,
            ref.repo,
            title=defanged_title(f"Fix {checks} on {base}", ref.full_name),
            body=base_fix_body(base, failure, marker, ref.full_name),
            labels=labels,
        )
        self.say(f"opened {issue.html_url} to fix {checks} on {base}")
        # Two Runs meeting the same red Base at once may each open one: the lowest
        # number stays, the other is closed again.
        first = next(i for i in self._existing(gh, scope, marker, me) if i.state == "open")
        if first.number != issue.number:
            gh.close_issue(ref.owner, ref.repo, issue.number)
            self.say(f"closed {issue.html_url} again: {first.html_url} was first")
            issue = first
        return issue

    def _existing(self, gh: GitHubPort, scope: RunScope, marker: str, me: str) -> list[IssueInfo]:
        """thirdshift's own Base fix issues carrying ``marker``, lowest number first (a
        person's that quotes the marker is not one)."""
        ref, merge = scope.ref, self.settings.merge_label
        found = [
            gh.issue(ref.owner, ref.repo, summary.number)
            for summary in gh.issues_labelled(ref.owner, ref.repo, merge, state="all")
            if not summary.is_pull_request
        ]
        ours = [i for i in found if same_login(i.author, me) and marker in i.body]
        return sorted(ours, key=lambda i: i.number)
