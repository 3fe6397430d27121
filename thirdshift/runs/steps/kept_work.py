"""Kept work: what an earlier Run left in its Worktree or its repository and never pushed. Adopted
(pushed, secret-checked) only at a head thirdshift recorded (adr/0027); else kept aside under a
ref that says so, never pushed, and the Run starts from origin."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from thirdshift.errors import GitError, ThirdshiftError
from thirdshift.git import own_git_dir
from thirdshift.records import Repository
from thirdshift.runs.ports import SessionSource
from thirdshift.runs.rules.branches import adoptable, unadopted_ref
from thirdshift.runs.scope import Found, Say
from thirdshift.runs.secret_check import push_checked
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store


@dataclass(frozen=True)
class KeptWork:
    """What an earlier Run left in the clone: ``left`` to adopt, or nothing, then perhaps
    ``set_aside`` (a head thirdshift never recorded, kept under a ref, never pushed)."""

    left: str | None
    set_aside: bool
    head: str | None = None
    """The head checked for adoption, the one ``left`` is pushed from."""


@dataclass(frozen=True)
class KeptWorkStep:
    """Finds, and adopts or sets aside, the kept work at a Run's Worktree path."""

    store: Store
    source: SessionSource
    settings: Settings
    scrub: Scrubber
    say: Say

    def take(self, found: Found, repository: Repository, fence: Callable[[], None]) -> KeptWork:
        """Under the Lease (a live Run's Worktree is that Run's business, not left-overs): the
        kept work, pushed when it may be adopted."""
        path = found.worktree_path
        busy = self.source.still_working_in(path)
        if busy:
            raise ThirdshiftError(
                f"processes of an earlier Run still work in {path} (pids "
                f"{', '.join(map(str, busy))}); stop them, then run thirdshift again"
            )
        kept = self._kept_work(found, repository)
        if kept.left is not None and kept.head is not None:
            self._adopt(found, kept.left, kept.head, fence)
        return kept

    def _kept_work(self, found: Found, repository: Repository) -> KeptWork:
        """What the Worktree an earlier Run kept at ``path`` holds that is not on origin, when it
        may be adopted; else nothing (and whether it was set aside). Kept work (a Worktree's,
        the local Issue branch of its repository) at a head thirdshift never recorded for this
        branch, and that origin's branch does not hold, is never adopted (a session that died
        mid-way, or a person, moved it): it is kept aside under a ref that says so, in the
        Worktree's repository, and the Run starts from origin."""
        clone, path, branch = found.clone, found.worktree_path, found.choice.branch
        number = found.ref.number
        left = clone.unpushed_work(path)
        kept = clone.kept_worktree(path, branch) if left is not None else None
        where = (
            f"the worktree {path}" if kept is not None else f"the repository {own_git_dir(path)}"
        )
        try:
            head = kept.head() if kept is not None else clone.local_head(path, branch)
        except GitError as problem:
            self.say(f"not adopting {branch} in {where}: its head cannot be read ({problem})")
            # Unknown is not adopted: a Rescue takes the crashed turn again.
            return KeptWork(None, set_aside=True)
        if head is None:
            return KeptWork(None, set_aside=False)
        on_origin = found.remote.get(branch)
        held = on_origin is not None and clone.is_ancestor(head, on_origin, path=path)
        recorded = self.store.recorded_heads(repository, number, branch)
        if adoptable(head, recorded, held_by_origin=held):
            return KeptWork(left, set_aside=False, head=head)
        kept_sha, loose = head, ""
        if kept is not None and kept.is_dirty():
            # Set aside with it, not lost; it is never pushed.
            kept.commit_all("thirdshift: uncommitted work of a Worktree that was not adopted")
            kept_sha, loose = kept.head(), " with the Worktree's uncommitted work"
        aside = unadopted_ref(branch, head)
        clone.keep_aside(path, aside, kept_sha)
        self.say(
            f"not adopting {branch} in {where}: its head {head[:7]} is not one thirdshift "
            f"recorded for #{number} (a session that died mid-way, or a person, may have "
            f"moved it); kept it aside{loose} as {aside}, and starting from origin"
        )
        return KeptWork(None, set_aside=True)

    def _adopt(self, found: Found, left: str, head: str, fence: Callable[[], None]) -> None:
        """Push what an earlier Run left in its Worktree (it died before saving it) at the
        ``head`` found adoptable: committed as it is, secret-checked like every push. A
        Continuation then starts from it."""
        clone, path, branch = found.clone, found.worktree_path, found.choice.branch
        self.say(f"the worktree {path} from an earlier Run holds {left}; pushing it to {branch}")
        kept = clone.kept_worktree(path, branch)
        kept.adopt(head)
        kept.commit_all("thirdshift: work an earlier Run left in its Worktree")
        try:
            push_checked(
                kept,
                branch,
                found.base,
                self.scrub.findings,
                fence,
                say=self.say,
                allow_workflow_changes=self.settings.allow_workflow_changes_for(
                    clone.owner, clone.name
                ),
            )
        except ThirdshiftError as error:
            raise ThirdshiftError(
                f"the worktree {path} from an earlier Run holds work that is not on origin "
                f"({left}) and thirdshift could not push it: {error}"
            ) from error
