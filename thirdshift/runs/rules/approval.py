"""Whether the Ready label still approves the issue's text: pure rules over what GitHub said.

A person who may label approves the title and body as they read when they added the label. An
edit after that by someone who may not label (the issue's own author, say) voids the approval;
an edit by someone who may label does not. A Run records the digest of the text it started on,
so a later Run on the same issue (a Continuation, a Rescue, a review Repair) sees text changed
since, and asks for a fresh label unless GitHub shows the change made by someone who may label.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from thirdshift.records import Labelling, TextEdit

ROLES_THAT_LABEL = frozenset({"admin", "maintain", "write", "triage"})
PASSED_OVER = " is passed over: "
"""Between the issue and why, in the Not claimed of a Run whose approval the text voided."""


def text_sha256(title: str, body: str) -> str:
    """The digest a Run records of the text it was started on."""
    return hashlib.sha256(f"{title}\n{body}".encode()).hexdigest()


@dataclass(frozen=True)
class EarlierText:
    """The text the issue's latest Run recorded (``text``, its digest), that Run's id and when
    it started; all None when the issue had no Run."""

    text: str | None = None
    run: int | None = None
    started_at: datetime | None = None


NO_EARLIER = EarlierText()


def approval_reason(
    *,
    ready_label: str,
    labelling: Labelling | None,
    edits: Sequence[TextEdit],
    may_label: Callable[[str], bool],
    text_now: str,
    earlier: EarlierText = NO_EARLIER,
    own_login: str | None = None,
    spec: int | None = None,
) -> str | None:
    """Why the issue's text is not approved, or None.

    ``labelling``: the last adding of the Ready label (None: never, as for a Run by hand).
    ``edits``: the title and body edits GitHub shows. ``text_now``: the digest of the text now;
    ``earlier``: the one the issue's latest Run recorded, if any. ``own_login``: thirdshift's;
    a label it put back (a hand-back after a crash, a released Claim) is no one's fresh
    approval of changed text. ``spec``: for a Ticket, the Spec whose Ready label approves it
    (``labelling`` is the Spec's, and the fix is to label the Spec again)."""
    again = _label_again(ready_label, spec)
    earlier_text, earlier_run, earlier_started_at = earlier.text, earlier.run, earlier.started_at
    if labelling is not None:
        late = _after_label(ready_label, labelling, edits, may_label, own_login, spec)
        if late is not None:
            return late
    if earlier_text is None or earlier_text == text_now or earlier_started_at is None:
        return None
    ours = labelling is not None and _by(labelling, own_login)
    if labelling is not None and labelling.at > earlier_started_at and not ours:
        return None  # labelled again since that Run began: a fresh approval, checked above
    since = [e for e in edits if e.at >= earlier_started_at]
    strangers = [e for e in since if not _trusted(e, may_label)]
    if strangers:
        last = max(strangers, key=lambda e: e.at)
        return (
            f"edited by {last.editor or 'a deleted account'} after Run {earlier_run} started on "
            f"it; {again} to have it run"
        )
    if since:
        return None  # the change is one made by someone who may label
    return (
        f"its title or body changed since Run {earlier_run} started on it, and GitHub shows "
        f"no edit by someone who may label; {again} to have it run"
    )


def _after_label(
    ready_label: str,
    labelling: Labelling,
    edits: Sequence[TextEdit],
    may_label: Callable[[str], bool],
    own_login: str | None,
    spec: int | None,
) -> str | None:
    """Why an edit by someone who may not label voids the label's approval, or None."""
    # A Spec's label thirdshift put back itself (after a failed Claim, a hand-back) approves
    # no Ticket's text: for a Ticket, every edit by someone who may not label counts, however
    # old.
    put_back = spec is not None and _by(labelling, own_login)
    # GitHub's stamps count whole seconds: an edit in the label's own second cannot be shown
    # to precede it, so it counts as after.
    late = [e for e in edits if (put_back or e.at >= labelling.at) and not _trusted(e, may_label)]
    if not late:
        return None
    editor = max(late, key=lambda e: e.at).editor or "a deleted account"
    labeller = labelling.login or "a deleted account"
    if spec is None:
        return f"edited by {editor} after {labeller} added {ready_label}; add the label again"
    again = _label_again(ready_label, spec)
    if put_back:
        return (
            f"edited by {editor}, and {ready_label} on Spec #{spec} was put there by "
            f"thirdshift, which approves no one's text; {again}"
        )
    return f"edited by {editor} after {labeller} added {ready_label} to Spec #{spec}; {again}"


def _label_again(ready_label: str, spec: int | None) -> str:
    """The fix: the Ready label added again, to the Spec when a Ticket's approval is its."""
    return (
        f"add {ready_label} again" if spec is None else f"add {ready_label} to Spec #{spec} again"
    )


def _by(labelling: Labelling, login: str | None) -> bool:
    return login is not None and (labelling.login or "").lower() == login.lower()


def _trusted(edit: TextEdit, may_label: Callable[[str], bool]) -> bool:
    return edit.editor is not None and may_label(edit.editor)
