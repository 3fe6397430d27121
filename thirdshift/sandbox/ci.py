"""The GitHub stand-in's simulated CI: a repository's check commands, run on every push.

A scenario declares checks per repository (``set_checks``: check name -> shell command). Every
push of a branch then starts one workflow run named ``CI`` with one job and one check run per
declared check. Each job runs its command with ``bash -c`` in a fresh checkout of the pushed
sha, in its own process group and under a timeout; the exit status decides ``success`` or
``failure`` and the combined output (its last ``log_limit`` bytes) becomes the job log.

A repository without declared checks gets no runs, as a repository without CI on GitHub.
Deleting a branch triggers nothing. A small pool of worker threads runs the jobs; every record
handed out is a frozen snapshot, so callers never see a half-updated run.

Additions to the agreed interface (all optional, nothing changed):

- ``SimulatedCI(repos, workdir, *, workers=2, check_timeout=300.0, log_limit=65536)``.
- ``rerun_failed_jobs`` raises ``SandboxError`` for an unknown run or one still in progress; a
  run without failed jobs is left as it is.
- Jobs cancelled by ``stop`` conclude ``cancelled``; a job past its timeout concludes
  ``failure`` with the reason at the end of its log.

A little over 500 lines: the job queue, the workers and the record they share are one state
machine, easier to follow in one file than split across three.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from thirdshift.errors import SandboxError
from thirdshift.sandbox.git_http import ZERO_SHA, BareRepos, PushEvent, git_env

__all__ = ["CheckRunRecord", "JobRecord", "SimulatedCI", "WorkflowRunRecord"]

log = logging.getLogger(__name__)

WORKFLOW_NAME = "CI"
QUEUED, IN_PROGRESS, COMPLETED = "queued", "in_progress", "completed"
SUCCESS, FAILURE, CANCELLED = "success", "failure", "cancelled"

# The login GitHub gives a workflow's own GITHUB_TOKEN. Events it causes (a push, a merge)
# start no workflow run, so no CI: GitHub's guard against workflows triggering themselves.
WORKFLOW_BOT_LOGIN = "github-actions[bot]"


@dataclass(frozen=True)
class CheckRunRecord:
    """One check run: the outcome of one job, as the checks API shows it."""

    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    started_at: datetime | None
    completed_at: datetime | None
    job_id: int
    run_id: int
    output_title: str | None
    output_summary: str | None


@dataclass(frozen=True)
class WorkflowRunRecord:
    """One workflow run; ``job_ids`` are the latest job of each check in its latest attempt."""

    id: int
    name: str
    head_sha: str
    head_branch: str | None
    status: str
    conclusion: str | None
    run_attempt: int
    created_at: datetime
    updated_at: datetime
    job_ids: tuple[int, ...]


@dataclass(frozen=True)
class JobRecord:
    """One job of a workflow run: one declared check run once."""

    id: int
    run_id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    started_at: datetime | None
    completed_at: datetime | None
    run_attempt: int
    log: str


@dataclass
class _Job:
    id: int
    check_run_id: int
    run_id: int
    repo: tuple[str, str]
    name: str
    command: str
    head_sha: str
    run_attempt: int
    status: str = QUEUED
    conclusion: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    log: str = ""
    summary: str | None = None

    def record(self, live_log: str | None = None) -> JobRecord:
        return JobRecord(
            id=self.id,
            run_id=self.run_id,
            name=self.name,
            head_sha=self.head_sha,
            status=self.status,
            conclusion=self.conclusion,
            started_at=self.started_at,
            completed_at=self.completed_at,
            run_attempt=self.run_attempt,
            log=self.log if live_log is None else live_log,
        )

    def check_run(self) -> CheckRunRecord:
        title = None
        if self.conclusion is not None:
            title = f"{self.name}: {self.conclusion}"
        return CheckRunRecord(
            id=self.check_run_id,
            name=self.name,
            head_sha=self.head_sha,
            status=self.status,
            conclusion=self.conclusion,
            started_at=self.started_at,
            completed_at=self.completed_at,
            job_id=self.id,
            run_id=self.run_id,
            output_title=title,
            output_summary=self.summary,
        )


@dataclass
class _Run:
    id: int
    repo: tuple[str, str]
    head_sha: str
    head_branch: str | None
    created_at: datetime
    updated_at: datetime
    run_attempt: int = 1
    job_ids: tuple[int, ...] = ()


def _now() -> datetime:
    return datetime.now(UTC)


class SimulatedCI:
    """Runs declared checks for pushed shas and keeps the runs, jobs and check runs.

    Subscribes to ``repos.on_push`` when built. Call ``stop`` when done: it cancels queued jobs,
    kills running check processes (their whole process group) and joins the workers.
    """

    def __init__(
        self,
        repos: BareRepos,
        workdir: Path,
        *,
        workers: int = 2,
        check_timeout: float = 300.0,
        log_limit: int = 64 * 1024,
    ) -> None:
        self._repos = repos
        self._workdir = workdir
        self._check_timeout = check_timeout
        self._log_limit = log_limit
        self._lock = threading.Condition(threading.RLock())
        self._ids = itertools.count(1)
        self._checks: dict[tuple[str, str], dict[str, str]] = {}
        self._runs: dict[int, _Run] = {}
        self._jobs: dict[int, _Job] = {}
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._queue: queue.Queue[int | None] = queue.Queue()
        self._stopped = False
        workdir.mkdir(parents=True, exist_ok=True)
        self._workers = [
            threading.Thread(target=self._work, name=f"sandbox-ci-{i}", daemon=True)
            for i in range(workers)
        ]
        for worker in self._workers:
            worker.start()
        repos.on_push(self._on_push)

    # -- scenario ---------------------------------------------------------------------------

    def set_checks(self, owner: str, name: str, checks: dict[str, str]) -> None:
        """Declare ``owner/name``'s checks (name -> shell command); an empty dict removes CI."""
        with self._lock:
            self._checks[(owner, name)] = dict(checks)

    def trigger(self, owner: str, name: str, head_sha: str, head_branch: str | None) -> None:
        """Start a workflow run for ``head_sha``, unless the repository declares no checks."""
        with self._lock:
            if self._stopped:
                raise SandboxError("the simulated CI is stopped; build a new one to run checks")
            checks = self._checks.get((owner, name))
            if not checks:
                return
            now = _now()
            run = _Run(next(self._ids), (owner, name), head_sha, head_branch, now, now)
            jobs = [self._new_job(run, check, command) for check, command in checks.items()]
            run.job_ids = tuple(job.id for job in jobs)
            self._runs[run.id] = run
        for job in jobs:
            self._queue.put(job.id)

    def rerun_failed_jobs(self, owner: str, name: str, run_id: int) -> None:
        """Run the failed (or cancelled) jobs of ``run_id`` again as attempt ``run_attempt + 1``;
        successful jobs are kept. Raises ``SandboxError`` if the run is unknown or not done."""
        with self._lock:
            if self._stopped:
                raise SandboxError("the simulated CI is stopped; build a new one to run checks")
            run = self._runs.get(run_id)
            if run is None or run.repo != (owner, name):
                raise SandboxError(f"workflow run {run_id} does not exist in {owner}/{name}")
            if self._run_status(run) != COMPLETED:
                raise SandboxError(
                    f"workflow run {run_id} of {owner}/{name} is still running; "
                    "wait for it to complete before re-running failed jobs"
                )
            failed = [i for i in run.job_ids if self._jobs[i].conclusion != SUCCESS]
            if not failed:
                return
            run.run_attempt += 1
            run.updated_at = _now()
            fresh: list[_Job] = []
            ids = []
            for job_id in run.job_ids:
                old = self._jobs[job_id]
                if job_id in failed:
                    job = self._new_job(run, old.name, old.command)
                    fresh.append(job)
                    ids.append(job.id)
                else:
                    ids.append(job_id)
            run.job_ids = tuple(ids)
        for job in fresh:
            self._queue.put(job.id)

    # -- reading ----------------------------------------------------------------------------

    def check_runs(self, owner: str, name: str, sha: str) -> list[CheckRunRecord]:
        """The latest check run of each check for ``sha``, in declaration order."""
        with self._lock:
            latest: dict[str, _Job] = {}
            for job in self._jobs.values():
                if job.repo != (owner, name) or job.head_sha != sha:
                    continue
                if job.name not in latest or latest[job.name].id < job.id:
                    latest[job.name] = job
            return [job.check_run() for job in sorted(latest.values(), key=lambda j: j.id)]

    def workflow_runs(self, owner: str, name: str) -> list[WorkflowRunRecord]:
        """Every workflow run of ``owner/name``, newest first (as GitHub lists them)."""
        with self._lock:
            runs = [r for r in self._runs.values() if r.repo == (owner, name)]
            return [self._run_record(r) for r in sorted(runs, key=lambda r: -r.id)]

    def workflow_run(self, owner: str, name: str, run_id: int) -> WorkflowRunRecord | None:
        """One workflow run, or ``None`` when ``owner/name`` has no such run."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.repo != (owner, name):
                return None
            return self._run_record(run)

    def jobs(self, owner: str, name: str, run_id: int) -> list[JobRecord]:
        """The jobs of the run's latest attempt (empty for an unknown run)."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.repo != (owner, name):
                return []
            return [self._jobs[i].record() for i in run.job_ids]

    def job_log(self, owner: str, name: str, job_id: int) -> str | None:
        """The job's log (so far, while it runs), or ``None`` when there is no such job."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.repo != (owner, name):
                return None
            if job.status != IN_PROGRESS:
                return job.log
        return self._tail(self._log_path(job_id))

    def idle(self, owner: str, name: str, sha: str) -> bool:
        """Whether no job for ``sha`` is queued or running."""
        with self._lock:
            return all(
                job.status == COMPLETED
                for job in self._jobs.values()
                if job.repo == (owner, name) and job.head_sha == sha
            )

    def wait_idle(self, owner: str, name: str, sha: str, timeout: float) -> bool:
        """Block until ``idle`` or ``timeout`` seconds pass; returns whether it became idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self.idle(owner, name, sha):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True

    def stop(self) -> None:
        """Cancel queued jobs, kill running check processes and join the workers. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            for job in self._jobs.values():
                if job.status == QUEUED:
                    self._finish(job, CANCELLED, "Cancelled: the simulated CI stopped.\n", None)
            running = list(self._running.values())
            self._lock.notify_all()
        for proc in running:
            _kill_group(proc)
        for _ in self._workers:
            self._queue.put(None)
        for worker in self._workers:
            worker.join(timeout=30)

    # -- internals --------------------------------------------------------------------------

    def _on_push(self, event: PushEvent) -> None:
        if event.new_sha == ZERO_SHA or not event.ref.startswith("refs/heads/"):
            return
        if event.pusher == WORKFLOW_BOT_LOGIN:
            return  # as on GitHub: what a workflow's GITHUB_TOKEN does starts no workflow
        with self._lock:
            if self._stopped:
                return
        self.trigger(event.owner, event.name, event.new_sha, event.ref.removeprefix("refs/heads/"))

    def _new_job(self, run: _Run, check: str, command: str) -> _Job:
        job = _Job(
            id=next(self._ids),
            check_run_id=next(self._ids),
            run_id=run.id,
            repo=run.repo,
            name=check,
            command=command,
            head_sha=run.head_sha,
            run_attempt=run.run_attempt,
        )
        self._jobs[job.id] = job
        return job

    def _run_status(self, run: _Run) -> str:
        statuses = {self._jobs[i].status for i in run.job_ids}
        if statuses == {COMPLETED}:
            return COMPLETED
        if statuses == {QUEUED}:
            return QUEUED
        return IN_PROGRESS

    def _run_record(self, run: _Run) -> WorkflowRunRecord:
        status = self._run_status(run)
        conclusion = None
        if status == COMPLETED:
            conclusions = {self._jobs[i].conclusion for i in run.job_ids}
            if conclusions == {SUCCESS}:
                conclusion = SUCCESS
            elif FAILURE in conclusions:
                conclusion = FAILURE
            else:
                conclusion = CANCELLED
        return WorkflowRunRecord(
            id=run.id,
            name=WORKFLOW_NAME,
            head_sha=run.head_sha,
            head_branch=run.head_branch,
            status=status,
            conclusion=conclusion,
            run_attempt=run.run_attempt,
            created_at=run.created_at,
            updated_at=run.updated_at,
            job_ids=run.job_ids,
        )

    def _finish(self, job: _Job, conclusion: str, log_text: str, summary: str | None) -> None:
        """Complete ``job``; the caller holds the lock."""
        job.status = COMPLETED
        job.conclusion = conclusion
        job.completed_at = _now()
        job.log = log_text
        job.summary = summary
        self._runs[job.run_id].updated_at = job.completed_at
        self._lock.notify_all()

    def _work(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id is None:
                return
            try:
                self._execute(job_id)
            except Exception:
                log.exception("simulated CI job %d crashed", job_id)
                with self._lock:
                    job = self._jobs[job_id]
                    if job.status != COMPLETED:
                        self._finish(job, FAILURE, job.log + "The simulated CI crashed.\n", None)

    def _execute(self, job_id: int) -> None:
        with self._lock:
            job = self._jobs[job_id]
            if job.status != QUEUED or self._stopped:
                return
            job.status = IN_PROGRESS
            job.started_at = _now()
            self._runs[job.run_id].updated_at = job.started_at
            self._lock.notify_all()
        checkout = self._workdir / f"job-{job_id}"
        log_path = self._log_path(job_id)
        try:
            self._checkout(job, checkout)
            conclusion, note, summary = self._run_command(job, checkout, log_path)
        except SandboxError as exc:
            conclusion, note, summary = FAILURE, f"{exc}\n", "The checkout failed."
        finally:
            shutil.rmtree(checkout, ignore_errors=True)
        log_text = self._tail(log_path) + note
        log_path.unlink(missing_ok=True)
        with self._lock:
            if self._stopped and conclusion != SUCCESS:
                conclusion, summary = CANCELLED, "Cancelled: the simulated CI stopped."
                log_text += "Cancelled: the simulated CI stopped.\n"
            self._finish(job, conclusion, log_text[-self._log_limit :], summary)

    def _checkout(self, job: _Job, checkout: Path) -> None:
        shutil.rmtree(checkout, ignore_errors=True)
        bare = self._repos.path(*job.repo)
        for args, cwd in (
            (["clone", "--quiet", "--no-checkout", str(bare), str(checkout)], self._workdir),
            (["-c", "advice.detachedHead=false", "checkout", "--quiet", job.head_sha], checkout),
        ):
            try:
                done = subprocess.run(
                    ["git", *args],
                    cwd=cwd,
                    env=git_env(),
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise SandboxError(f"checking out {job.head_sha[:12]} timed out") from exc
            if done.returncode != 0:
                raise SandboxError(
                    f"cannot check out {job.head_sha[:12]} of {job.repo[0]}/{job.repo[1]} "
                    f"(git {args[0]} exit {done.returncode}): "
                    f"{done.stderr.decode(errors='replace').strip()}"
                )

    def _run_command(self, job: _Job, checkout: Path, log_path: Path) -> tuple[str, str, str]:
        """Run the check; returns its conclusion, a note for the log and the summary."""
        env = git_env(
            {
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_SHA": job.head_sha,
                "GITHUB_REPOSITORY": f"{job.repo[0]}/{job.repo[1]}",
                "GITHUB_JOB": job.name,
            }
        )
        env.pop("GIT_TERMINAL_PROMPT", None)
        with log_path.open("wb") as out:
            with self._lock:
                if self._stopped:
                    return CANCELLED, "", "Cancelled: the simulated CI stopped."
                proc = subprocess.Popen(
                    ["bash", "-c", job.command],
                    cwd=checkout,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                self._running[job.id] = proc
            try:
                status = proc.wait(timeout=self._check_timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()
                note = f"The check timed out after {self._check_timeout:g} s and was killed.\n"
                return FAILURE, note, f"`{job.command}` timed out after {self._check_timeout:g} s."
            finally:
                _kill_group(proc)
                with self._lock:
                    self._running.pop(job.id, None)
        conclusion = SUCCESS if status == 0 else FAILURE
        return conclusion, "", f"`{job.command}` exited with status {status}."

    def _log_path(self, job_id: int) -> Path:
        return self._workdir / f"job-{job_id}.log"

    def _tail(self, path: Path) -> str:
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - self._log_limit))
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the check's whole process group (its children too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
