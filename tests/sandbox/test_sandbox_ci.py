"""The simulated CI, driven by real pushes over smart HTTP and running real check commands."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sandbox.test_sandbox_git import GitWorld, make_source, serving
from thirdshift.errors import SandboxError
from thirdshift.sandbox.ci import SimulatedCI
from thirdshift.sandbox.git_http import BareRepos


@dataclass
class CIWorld:
    """A served repository acme/demo, a checkout of it, and the CI watching its pushes."""

    git: GitWorld
    ci: SimulatedCI
    checkout: Path
    workdir: Path

    def push(self, path: str, text: str, branch: str = "main") -> str:
        """Commit one file and push it to ``branch``; returns the new sha."""
        sha = self.git.commit_file(self.checkout, path, text, f"Change {path}")
        self.git.git("push", "--quiet", "origin", f"HEAD:refs/heads/{branch}", cwd=self.checkout)
        return sha

    def wait(self, sha: str) -> None:
        assert self.ci.wait_idle("acme", "demo", sha, timeout=30)


@contextmanager
def running_ci(
    tmp_path: Path,
    *,
    workers: int = 2,
    check_timeout: float = 300.0,
    log_limit: int = 64 * 1024,
) -> Iterator[CIWorld]:
    """acme/demo served over HTTP, cloned, and watched by a CI built with these options."""
    repos = BareRepos(tmp_path / "repos")
    workdir = tmp_path / "ci"
    ci = SimulatedCI(
        repos, workdir, workers=workers, check_timeout=check_timeout, log_limit=log_limit
    )
    try:
        with serving(repos, tmp_path) as world:
            repos.create("acme", "demo", make_source(tmp_path))
            checkout = world.clone("acme", "demo", "work")
            yield CIWorld(world, ci, checkout, workdir)
    finally:
        ci.stop()


@pytest.fixture
def ci_world(tmp_path: Path) -> Iterator[CIWorld]:
    """acme/demo served over HTTP with a two-worker CI."""
    with running_ci(tmp_path) as world:
        yield world


def _wait_for(condition: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_push_runs_declared_checks_and_concludes_by_exit_status(ci_world: CIWorld) -> None:
    """One run per push, one job and check run per check; exit 0 is success, else failure."""
    ci = ci_world.ci
    ci.set_checks(
        "acme",
        "demo",
        {
            "test": "echo running tests; grep -q 'return 42' app.py && echo all green",
            "lint": "echo 'app.py:1: E999 lint is unhappy' >&2; exit 3",
        },
    )
    sha = ci_world.push("app.py", "def answer():\n    return 42\n", branch="feature")
    ci_world.wait(sha)

    [run] = ci.workflow_runs("acme", "demo")
    assert (run.name, run.head_sha, run.head_branch) == ("CI", sha, "feature")
    assert (run.status, run.conclusion, run.run_attempt) == ("completed", "failure", 1)
    assert ci.workflow_run("acme", "demo", run.id) == run
    assert ci.workflow_run("acme", "other", run.id) is None

    jobs = {job.name: job for job in ci.jobs("acme", "demo", run.id)}
    assert set(jobs) == {"test", "lint"}
    assert (jobs["test"].status, jobs["test"].conclusion) == ("completed", "success")
    assert (jobs["lint"].status, jobs["lint"].conclusion) == ("completed", "failure")
    assert "all green" in jobs["test"].log
    assert "E999 lint is unhappy" in jobs["lint"].log
    assert ci.job_log("acme", "demo", jobs["lint"].id) == jobs["lint"].log
    assert ci.job_log("acme", "demo", 999_999) is None
    assert tuple(sorted(run.job_ids)) == tuple(sorted(j.id for j in jobs.values()))

    checks = {check.name: check for check in ci.check_runs("acme", "demo", sha)}
    assert checks["test"].conclusion == "success"
    assert checks["lint"].conclusion == "failure"
    assert checks["lint"].job_id == jobs["lint"].id
    assert checks["lint"].run_id == run.id
    assert checks["lint"].output_summary is not None
    assert "status 3" in checks["lint"].output_summary
    ids = [run.id, *run.job_ids, *(c.id for c in checks.values())]
    assert len(set(ids)) == len(ids)
    assert list(ci_world.workdir.iterdir()) == []


def test_status_moves_from_queued_to_in_progress_to_completed(tmp_path: Path) -> None:
    """With one worker, the second job waits queued while the first runs."""
    gate = tmp_path / "gate"
    with running_ci(tmp_path, workers=1) as world:
        ci = world.ci
        wait_gate = f"while [ ! -f '{gate}' ]; do sleep 0.05; done; echo passed the gate"
        ci.set_checks("acme", "demo", {"first": wait_gate, "second": "echo second"})
        sha = world.push("x.txt", "x\n")

        def statuses() -> dict[str, str]:
            return {c.name: c.status for c in ci.check_runs("acme", "demo", sha)}

        _wait_for(lambda: statuses() == {"first": "in_progress", "second": "queued"})
        [run] = ci.workflow_runs("acme", "demo")
        assert run.status == "in_progress"
        assert run.conclusion is None
        assert not ci.idle("acme", "demo", sha)
        assert not ci.wait_idle("acme", "demo", sha, timeout=0.2)
        [first, second] = ci.check_runs("acme", "demo", sha)
        assert first.started_at is not None
        assert first.completed_at is None
        assert second.started_at is None

        gate.touch()
        world.wait(sha)
        assert statuses() == {"first": "completed", "second": "completed"}
        assert ci.idle("acme", "demo", sha)
        [run] = ci.workflow_runs("acme", "demo")
        assert (run.status, run.conclusion) == ("completed", "success")


def test_rerun_failed_jobs_runs_only_the_failed_one(ci_world: CIWorld, tmp_path: Path) -> None:
    """A re-run is attempt 2 of the same run and re-runs just the failed job."""
    ci = ci_world.ci
    tally = tmp_path / "tally"
    flaky = tmp_path / "flaky-once"
    ci.set_checks(
        "acme",
        "demo",
        {
            "steady": f"echo steady >> '{tally}'",
            "flaky": (
                f"echo flaky >> '{tally}'; "
                f"if [ -f '{flaky}' ]; then echo recovered; else touch '{flaky}'; "
                "echo flaked; exit 1; fi"
            ),
        },
    )
    sha = ci_world.push("y.txt", "y\n")
    ci_world.wait(sha)
    [run] = ci.workflow_runs("acme", "demo")
    assert run.conclusion == "failure"
    before = {job.name: job for job in ci.jobs("acme", "demo", run.id)}

    ci.rerun_failed_jobs("acme", "demo", run.id)
    ci_world.wait(sha)

    [rerun] = ci.workflow_runs("acme", "demo")
    assert (rerun.id, rerun.run_attempt) == (run.id, 2)
    assert (rerun.status, rerun.conclusion) == ("completed", "success")
    after = {job.name: job for job in ci.jobs("acme", "demo", run.id)}
    assert after["steady"] == before["steady"]
    assert after["flaky"].id != before["flaky"].id
    assert (after["flaky"].run_attempt, after["flaky"].conclusion) == (2, "success")
    assert "recovered" in after["flaky"].log
    assert ci.job_log("acme", "demo", before["flaky"].id) is not None
    assert sorted(tally.read_text().split()) == ["flaky", "flaky", "steady"]
    checks = {check.name: check for check in ci.check_runs("acme", "demo", sha)}
    assert checks["flaky"].job_id == after["flaky"].id
    assert checks["flaky"].conclusion == "success"

    ci.rerun_failed_jobs("acme", "demo", run.id)
    assert ci.workflow_runs("acme", "demo")[0].run_attempt == 2
    with pytest.raises(SandboxError, match="does not exist"):
        ci.rerun_failed_jobs("acme", "demo", 424242)


def test_rerun_of_a_running_run_is_refused(tmp_path: Path) -> None:
    """Failed jobs can only be re-run once the run has completed."""
    gate = tmp_path / "gate"
    with running_ci(tmp_path) as world:
        world.ci.set_checks(
            "acme", "demo", {"slow": f"while [ ! -f '{gate}' ]; do sleep 0.05; done"}
        )
        sha = world.push("z.txt", "z\n")
        [run] = world.ci.workflow_runs("acme", "demo")
        with pytest.raises(SandboxError, match="still running"):
            world.ci.rerun_failed_jobs("acme", "demo", run.id)
        gate.touch()
        world.wait(sha)


def test_repository_without_checks_gets_no_runs(ci_world: CIWorld) -> None:
    """CI is absent until checks are declared: pushes start nothing."""
    sha = ci_world.push("a.txt", "a\n")
    assert ci_world.ci.wait_idle("acme", "demo", sha, timeout=1)
    assert ci_world.ci.workflow_runs("acme", "demo") == []
    assert ci_world.ci.check_runs("acme", "demo", sha) == []


def test_deleting_a_branch_triggers_nothing(ci_world: CIWorld) -> None:
    """A push that deletes a branch starts no run."""
    ci = ci_world.ci
    ci.set_checks("acme", "demo", {"test": "true"})
    sha = ci_world.push("b.txt", "b\n", branch="topic")
    ci_world.wait(sha)
    ci_world.git.git("push", "--quiet", "origin", "--delete", "topic", cwd=ci_world.checkout)
    assert len(ci.workflow_runs("acme", "demo")) == 1


def test_stop_kills_a_hanging_check_and_its_children(tmp_path: Path) -> None:
    """stop() kills the check's whole process group and cancels the job promptly."""
    pidfile = tmp_path / "child.pid"
    with running_ci(tmp_path) as world:
        world.ci.set_checks(
            "acme",
            "demo",
            {"hang": f"sleep 300 & echo $! > '{pidfile}'; echo hanging; wait"},
        )
        sha = world.push("c.txt", "c\n")
        _wait_for(pidfile.exists)
        _wait_for(lambda: pidfile.read_text().strip() != "")
        child = int(pidfile.read_text())
        started = time.monotonic()
        world.ci.stop()
        assert time.monotonic() - started < 10
        [check] = world.ci.check_runs("acme", "demo", sha)
        assert (check.status, check.conclusion) == ("completed", "cancelled")
        assert "hanging" in (world.ci.job_log("acme", "demo", check.job_id) or "")
        _wait_for(lambda: not _alive(child))
        with pytest.raises(SandboxError, match="stopped"):
            world.ci.trigger("acme", "demo", sha, "main")


def test_check_past_its_timeout_fails(tmp_path: Path) -> None:
    """A check that outlives check_timeout is killed and concludes failure, saying why."""
    with running_ci(tmp_path, check_timeout=0.5) as world:
        world.ci.set_checks("acme", "demo", {"slow": "echo begun; sleep 60"})
        sha = world.push("d.txt", "d\n")
        world.wait(sha)
        [check] = world.ci.check_runs("acme", "demo", sha)
        assert check.conclusion == "failure"
        log = world.ci.job_log("acme", "demo", check.job_id) or ""
        assert "begun" in log
        assert "timed out after 0.5 s" in log


def test_job_log_keeps_only_the_tail(tmp_path: Path) -> None:
    """A chatty check's log is capped at log_limit bytes, keeping the end."""
    with running_ci(tmp_path, log_limit=1000) as world:
        world.ci.set_checks("acme", "demo", {"chatty": "seq 1 5000; echo THE END"})
        sha = world.push("e.txt", "e\n")
        world.wait(sha)
        [check] = world.ci.check_runs("acme", "demo", sha)
        log = world.ci.job_log("acme", "demo", check.job_id) or ""
        assert len(log) <= 1000
        assert log.endswith("THE END\n")


def test_checks_run_in_a_checkout_of_the_pushed_sha(ci_world: CIWorld) -> None:
    """Each job sees exactly the pushed commit's files, checked out detached."""
    ci = ci_world.ci
    ci.set_checks("acme", "demo", {"look": "git rev-parse HEAD; cat app.py; git status --short"})
    first = ci_world.push("app.py", "def answer():\n    return 1\n")
    second = ci_world.push("app.py", "def answer():\n    return 2\n")
    ci_world.wait(first)
    ci_world.wait(second)
    for sha, value in ((first, "return 1"), (second, "return 2")):
        [check] = ci.check_runs("acme", "demo", sha)
        log = ci.job_log("acme", "demo", check.job_id) or ""
        assert log.splitlines()[0] == sha
        assert value in log
    assert [r.head_sha for r in ci.workflow_runs("acme", "demo")] == [second, first]


def test_trigger_runs_checks_without_a_push(ci_world: CIWorld) -> None:
    """trigger starts a run for any sha of the repository, e.g. a merge commit."""
    ci = ci_world.ci
    ci.set_checks("acme", "demo", {"test": "true"})
    sha = ci_world.git.repos.resolve("acme", "demo", "main")
    assert sha is not None
    ci.trigger("acme", "demo", sha, None)
    ci_world.wait(sha)
    [run] = ci.workflow_runs("acme", "demo")
    assert (run.head_branch, run.conclusion) == (None, "success")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
