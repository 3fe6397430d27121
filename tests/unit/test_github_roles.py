"""GitHub by role: the roles of ``GitHubPort`` stay small, the real adapter and the fake play
every one of them, and the Lease's fence asks before each write of any role and before no
read."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Protocol

import pytest

from tests.support.fake_github import FakeGitHub
from thirdshift.errors import ThirdshiftError
from thirdshift.github import GitHub
from thirdshift.runs.fence import fence_github, fenced
from thirdshift.runs.ports import (
    READS,
    WRITES,
    ApprovalReads,
    Checks,
    GitHubPort,
    Identity,
    IssueLabels,
    MarkedComments,
    Merging,
    Publishing,
    PullRequests,
    SpecGraph,
)
from thirdshift.runs.rules.review import FeedbackReads

ROLES: tuple[type, ...] = tuple(role for role in GitHubPort.__bases__ if role is not Protocol)


def methods_of(role: type) -> set[str]:
    """The public methods a protocol declares, its own and its bases'."""
    return {
        name
        for klass in role.__mro__
        if klass not in (Protocol, Generic, object)
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("_")
    }


def _plays_every_role(github: GitHub | FakeGitHub) -> tuple[object, ...]:
    """Never called: mypy --strict holds the adapter and the fake to each role by name."""
    identity: Identity = github
    issue_labels: IssueLabels = github
    marked_comments: MarkedComments = github
    approval_reads: ApprovalReads = github
    feedback_reads: FeedbackReads = github
    pull_requests: PullRequests = github
    checks: Checks = github
    merging: Merging = github
    publishing: Publishing = github
    spec_graph: SpecGraph = github
    whole: GitHubPort = github
    return (
        identity,
        issue_labels,
        marked_comments,
        approval_reads,
        feedback_reads,
        pull_requests,
        checks,
        merging,
        publishing,
        spec_graph,
        whole,
    )


def test_every_role_stays_a_handful_of_methods() -> None:
    """A role is what one consumer calls, not all of GitHub: at most eight methods."""
    assert {
        role.__name__: len(methods_of(role)) for role in ROLES if len(methods_of(role)) > 8
    } == {}


def test_every_role_method_is_sorted_into_reads_or_writes_once() -> None:
    """The fence lets READS pass and asks before every other method, so a method a role gains
    is sorted here first: a new write cannot pass unfenced as a read nobody meant."""
    every = set().union(*(methods_of(role) for role in ROLES))
    assert not READS & WRITES
    assert every == READS | WRITES
    assert methods_of(GitHubPort) == every


@pytest.mark.parametrize("implementation", [GitHub, FakeGitHub], ids=["adapter", "fake"])
@pytest.mark.parametrize("role", ROLES, ids=lambda role: role.__name__)
def test_the_adapter_and_the_fake_have_each_role_method_with_its_parameters(
    implementation: type, role: type
) -> None:
    """Each method of each role is on both, with the role's parameter names, kinds and
    defaults (mypy checks the types; this also catches a renamed positional parameter)."""
    for method in sorted(methods_of(role)):
        declared = inspect.signature(getattr(role, method))
        found = inspect.signature(getattr(implementation, method))
        assert [(p.name, p.kind, p.default) for p in found.parameters.values()] == [
            (p.name, p.kind, p.default) for p in declared.parameters.values()
        ], f"{implementation.__name__}.{method}"


class Recorder:
    """Answers every method by recording its name and arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., str]:
        def record(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return f"answer of {name}"

        return record


def refusing(asked: list[str]) -> Callable[[], None]:
    def fence() -> None:
        asked.append("fence")
        raise ThirdshiftError("fenced")

    return fence


@pytest.mark.parametrize("method", sorted(WRITES))
def test_a_fenced_write_asks_the_fence_and_a_refusal_writes_nothing(method: str) -> None:
    """Before each write of every role the fence is asked; when it refuses, nothing is sent."""
    github, asked = Recorder(), list[str]()
    gh = fenced(github, refusing(asked))
    with pytest.raises(ThirdshiftError, match="fenced"):
        getattr(gh, method)("acme", "widgets", 1, title="t")
    assert (asked, github.calls) == (["fence"], [])


@pytest.mark.parametrize("method", sorted(READS))
def test_a_fenced_read_passes_without_asking(method: str) -> None:
    """Reading needs no Lease: the call and its answer pass through untouched."""
    github, asked = Recorder(), list[str]()
    gh = fenced(github, refusing(asked))
    assert getattr(gh, method)("acme", "widgets", 1, state="open") == f"answer of {method}"
    assert asked == []
    assert github.calls == [(method, ("acme", "widgets", 1), {"state": "open"})]


def test_a_write_the_fence_allows_goes_through_with_its_answer() -> None:
    """A held Lease: the fence is asked, then the write is made with its arguments."""
    github, asked = Recorder(), list[str]()
    gh = fenced(github, lambda: asked.append("fence"))
    assert gh.merge_pull("acme", "widgets", 3, sha="s") == "answer of merge_pull"
    assert asked == ["fence"]
    assert github.calls == [("merge_pull", ("acme", "widgets", 3), {"sha": "s"})]


def test_a_method_nobody_sorted_is_fenced_as_a_write(tmp_path: Path) -> None:
    """Wrapping more than a role (the fake, say) fences what READS does not name."""
    fake, asked = FakeGitHub(tmp_path), list[str]()
    gh = fenced(fake, refusing(asked))
    with pytest.raises(ThirdshiftError, match="fenced"):
        gh.set_issue_labels("acme", "widgets", 1, [])
    assert (asked, fake.calls) == (["fence"], [])


def test_the_whole_port_fenced_keeps_its_fence_in_reach(tmp_path: Path) -> None:
    """``fence_github`` gives the fence itself too, for a write made elsewhere."""
    fake, asked = FakeGitHub(tmp_path), list[str]()
    gh = fence_github(fake, refusing(asked))
    with pytest.raises(ThirdshiftError, match="fenced"):
        gh.fence()
    assert gh.authenticated_login() == fake.login
    assert asked == ["fence"]
