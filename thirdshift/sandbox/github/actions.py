"""REST routes of the GitHub stand-in for git refs, commits, check runs, the combined status
and Actions (workflow runs, jobs, job logs, re-runs of failed jobs)."""

from __future__ import annotations

from thirdshift.errors import SandboxError
from thirdshift.sandbox.ci import CheckRunRecord, JobRecord, WorkflowRunRecord
from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.pulls import git_output, minimal_pulls
from thirdshift.sandbox.github.shapes import Json, node_id, stamp
from thirdshift.sandbox.github.state import ApiError, Repo, not_found

_REPO = "/repos/{owner}/{repo}"
WORKFLOW_PATH = ".github/workflows/ci.yml"
WORKFLOW_ID = 161335


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    add = router.add
    add("GET", _REPO + "/git/ref/{ref+}", get_ref)
    add("DELETE", _REPO + "/git/refs/{ref+}", delete_ref)
    add("GET", _REPO + "/commits/{ref+}/check-runs", list_check_runs)
    add("GET", _REPO + "/commits/{ref+}/status", combined_status)
    add("GET", _REPO + "/commits/{ref+}", get_commit)
    add("GET", _REPO + "/actions/runs", list_runs)
    add("GET", _REPO + "/actions/runs/{id}", get_run)
    add("GET", _REPO + "/actions/runs/{id}/jobs", list_jobs)
    add("POST", _REPO + "/actions/runs/{id}/rerun-failed-jobs", rerun_failed_jobs)
    add("GET", _REPO + "/actions/jobs/{id}", get_job)
    add("GET", _REPO + "/actions/jobs/{id}/logs", job_logs)


# -- refs and commits ---------------------------------------------------------------------


def get_ref(call: Call) -> Reply:
    repo = call.repo()
    ref = "refs/" + call.params["ref"]
    branch = ref.removeprefix("refs/heads/")
    sha = call.backend.git.branches(repo.owner, repo.name).get(branch)
    if not ref.startswith("refs/heads/") or sha is None:
        raise not_found()
    base = call.shapes.urls.repo(repo)
    return Reply(
        200,
        {
            "ref": ref,
            "node_id": node_id("REF", abs(hash(ref)) % 10**9),
            "url": f"{base}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": f"{base}/git/commits/{sha}"},
        },
    )


def delete_ref(call: Call) -> Reply:
    """Delete a branch; open pull requests from it are closed, as on GitHub."""
    repo = call.repo("write")
    ref = call.params["ref"]
    if not ref.startswith("heads/"):
        raise ApiError(422, "Reference does not exist")
    branch = ref.removeprefix("heads/")
    try:
        call.backend.git.delete_branch(repo.owner, repo.name, branch)
    except SandboxError as exc:
        raise ApiError(422, "Reference does not exist") from exc
    for issue in repo.issues.values():
        if issue.pull is not None and issue.state == "open" and issue.pull.head_ref == branch:
            call.world.set_state(repo, issue, "closed", None, call.login or "")
    return Reply(204)


def _sha(call: Call, repo: Repo) -> str:
    sha = call.backend.git.resolve(repo.owner, repo.name, call.params["ref"])
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
    return sha


def get_commit(call: Call) -> Reply:
    repo = call.repo()
    sha = _sha(call, repo)
    info = call.backend.git.commit(repo.owner, repo.name, sha)
    base = call.shapes.urls.repo(repo)
    tree = git_output(call, repo, "rev-parse", f"{sha}^{{tree}}").strip()
    person = {"name": info.author_name, "email": info.author_email, "date": stamp(info.authored_at)}
    return Reply(
        200,
        {
            "sha": sha,
            "node_id": node_id("C", int(sha[:8], 16)),
            "url": f"{base}/commits/{sha}",
            "html_url": f"{call.shapes.urls.web}/{repo.full_name}/commit/{sha}",
            "comments_url": f"{base}/commits/{sha}/comments",
            "commit": {
                "url": f"{base}/git/commits/{sha}",
                "author": person,
                "committer": person,
                "message": info.message,
                "comment_count": 0,
                "tree": {"sha": tree, "url": f"{base}/git/trees/{tree}"},
            },
            "author": {},
            "committer": {},
            "parents": [
                {
                    "sha": p,
                    "url": f"{base}/commits/{p}",
                    "html_url": f"{call.shapes.urls.web}/{repo.full_name}/commit/{p}",
                }
                for p in info.parents
            ],
        },
    )


# -- checks and statuses ------------------------------------------------------------------


_ACTIONS_APP: Json = {
    "id": 15368,
    "slug": "github-actions",
    "node_id": "MDM6QXBwMTUzNjg=",
    "name": "GitHub Actions",
    "description": "Automate your workflow from idea to production",
    "external_url": "https://help.github.com/en/actions",
    "html_url": "https://github.com/apps/github-actions",
    "created_at": "2018-07-30T09:30:17Z",
    "updated_at": "2019-12-10T19:04:12Z",
    "permissions": {"checks": "write", "contents": "write", "pull_requests": "write"},
    "events": ["check_run", "check_suite", "pull_request", "push"],
}


def check_run_json(call: Call, repo: Repo, record: CheckRunRecord) -> Json:
    base = call.shapes.urls.repo(repo)
    web = f"{call.shapes.urls.web}/{repo.full_name}/actions/runs/{record.run_id}"
    return {
        "id": record.id,
        "node_id": node_id("CR", record.id),
        "head_sha": record.head_sha,
        "external_id": str(record.job_id),
        "url": f"{base}/check-runs/{record.id}",
        "html_url": f"{web}/job/{record.job_id}",
        "details_url": f"{web}/job/{record.job_id}",
        "status": record.status,
        "conclusion": record.conclusion,
        "started_at": stamp(record.started_at),
        "completed_at": stamp(record.completed_at),
        "output": {
            "title": record.output_title,
            "summary": record.output_summary,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{base}/check-runs/{record.id}/annotations",
        },
        "name": record.name,
        "check_suite": {"id": record.run_id},
        "app": {**_ACTIONS_APP, "owner": call.shapes.user("github")},
        "pull_requests": minimal_pulls(call, repo, record.head_sha),
    }


def list_check_runs(call: Call) -> Reply:
    repo = call.repo()
    sha = _sha(call, repo)
    runs = call.backend.ci.check_runs(repo.owner, repo.name, sha)
    name = call.query.get("check_name")
    status = call.query.get("status")
    runs = [
        r
        for r in runs
        if (name is None or r.name == name) and (status is None or r.status == status)
    ]
    return call.page([check_run_json(call, repo, r) for r in runs], wrap="check_runs")


def combined_status(call: Call) -> Reply:
    """The commit-status API's view: Actions report check runs, not statuses, so this is
    ``pending`` with no statuses, exactly what GitHub answers for an Actions-only repo."""
    repo = call.repo()
    sha = _sha(call, repo)
    base = call.shapes.urls.repo(repo)
    return Reply(
        200,
        {
            "state": "pending",
            "statuses": [],
            "sha": sha,
            "total_count": 0,
            "repository": call.shapes.repo_minimal(repo),
            "commit_url": f"{base}/commits/{sha}",
            "url": f"{base}/commits/{sha}/status",
        },
    )


# -- Actions ------------------------------------------------------------------------------


def run_json(call: Call, repo: Repo, run: WorkflowRunRecord, number: int) -> Json:
    base = f"{call.shapes.urls.repo(repo)}/actions/runs/{run.id}"
    try:
        info = call.backend.git.commit(repo.owner, repo.name, run.head_sha)
        tree = git_output(call, repo, "rev-parse", f"{run.head_sha}^{{tree}}").strip()
        person = {"name": info.author_name, "email": info.author_email}
        head_commit: Json | None = {
            "id": info.sha,
            "tree_id": tree,
            "message": info.message,
            "timestamp": stamp(info.authored_at),
            "author": person,
            "committer": person,
        }
        title = info.message.splitlines()[0] if info.message else run.name
    except SandboxError:
        head_commit, title = None, run.name
    minimal = call.shapes.repo_minimal(repo)
    return {
        "id": run.id,
        "name": run.name,
        "node_id": node_id("WFR", run.id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": WORKFLOW_PATH,
        "display_title": title,
        "run_number": number,
        "event": "push",
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": WORKFLOW_ID,
        "check_suite_id": run.id,
        "check_suite_node_id": node_id("CS", run.id),
        "url": base,
        "html_url": f"{call.shapes.urls.web}/{repo.full_name}/actions/runs/{run.id}",
        "pull_requests": minimal_pulls(call, repo, run.head_sha),
        "created_at": stamp(run.created_at),
        "updated_at": stamp(run.updated_at),
        "run_attempt": run.run_attempt,
        "run_started_at": stamp(run.created_at),
        "jobs_url": base + "/jobs",
        "logs_url": base + "/logs",
        "check_suite_url": f"{call.shapes.urls.repo(repo)}/check-suites/{run.id}",
        "artifacts_url": base + "/artifacts",
        "cancel_url": base + "/cancel",
        "rerun_url": base + "/rerun",
        "previous_attempt_url": f"{base}/attempts/{run.run_attempt - 1}"
        if run.run_attempt > 1
        else None,
        "workflow_url": f"{call.shapes.urls.repo(repo)}/actions/workflows/{WORKFLOW_ID}",
        "head_commit": head_commit,
        "repository": minimal,
        "head_repository": minimal,
    }


def _numbers(call: Call, repo: Repo) -> dict[int, int]:
    runs = call.backend.ci.workflow_runs(repo.owner, repo.name)
    return {run.id: n for n, run in enumerate(sorted(runs, key=lambda r: r.id), start=1)}


def list_runs(call: Call) -> Reply:
    repo = call.repo()
    runs = call.backend.ci.workflow_runs(repo.owner, repo.name)
    numbers = _numbers(call, repo)
    sha = call.query.get("head_sha")
    branch = call.query.get("branch")
    status = call.query.get("status")
    runs = [
        r
        for r in runs
        if (sha is None or r.head_sha == sha)
        and (branch is None or r.head_branch == branch)
        and (status is None or status in (r.status, r.conclusion))
    ]
    return call.page([run_json(call, repo, r, numbers[r.id]) for r in runs], wrap="workflow_runs")


def _run(call: Call, repo: Repo) -> WorkflowRunRecord:
    run = call.backend.ci.workflow_run(repo.owner, repo.name, call.number("id"))
    if run is None:
        raise not_found()
    return run


def get_run(call: Call) -> Reply:
    repo = call.repo()
    run = _run(call, repo)
    return Reply(200, run_json(call, repo, run, _numbers(call, repo)[run.id]))


def job_json(call: Call, repo: Repo, job: JobRecord, run: WorkflowRunRecord) -> Json:
    base = call.shapes.urls.repo(repo)
    checks = call.backend.ci.check_runs(repo.owner, repo.name, job.head_sha)
    check_id = next((c.id for c in checks if c.job_id == job.id), job.id)
    return {
        "id": job.id,
        "run_id": job.run_id,
        "run_url": f"{base}/actions/runs/{job.run_id}",
        "run_attempt": job.run_attempt,
        "node_id": node_id("CR", job.id),
        "head_sha": job.head_sha,
        "url": f"{base}/actions/jobs/{job.id}",
        "html_url": f"{call.shapes.urls.web}/{repo.full_name}/actions/runs/{job.run_id}"
        f"/job/{job.id}",
        "status": job.status,
        "conclusion": job.conclusion,
        "created_at": stamp(job.started_at or run.created_at),
        "started_at": stamp(job.started_at or run.created_at),
        "completed_at": stamp(job.completed_at),
        "name": job.name,
        "steps": [],
        "check_run_url": f"{base}/check-runs/{check_id}",
        "labels": ["ubuntu-latest"],
        "runner_id": 1 if job.started_at else None,
        "runner_name": "sandbox-runner" if job.started_at else None,
        "runner_group_id": 1 if job.started_at else None,
        "runner_group_name": "sandbox" if job.started_at else None,
        "workflow_name": run.name,
        "head_branch": run.head_branch,
    }


def list_jobs(call: Call) -> Reply:
    repo = call.repo()
    run = _run(call, repo)
    jobs = call.backend.ci.jobs(repo.owner, repo.name, run.id)
    return call.page([job_json(call, repo, j, run) for j in jobs], wrap="jobs")


def _job(call: Call, repo: Repo) -> tuple[JobRecord, WorkflowRunRecord]:
    job_id = call.number("id")
    ci = call.backend.ci
    for run in ci.workflow_runs(repo.owner, repo.name):
        if job_id in run.job_ids:
            job = next(j for j in ci.jobs(repo.owner, repo.name, run.id) if j.id == job_id)
            return job, run
    raise not_found()


def get_job(call: Call) -> Reply:
    repo = call.repo()
    job, run = _job(call, repo)
    return Reply(200, job_json(call, repo, job, run))


def job_logs(call: Call) -> Reply:
    """302 to a short-lived download URL the stand-in serves itself, as GitHub does."""
    repo = call.repo()
    job_id = call.number("id")
    if call.backend.ci.job_log(repo.owner, repo.name, job_id) is None:
        raise not_found()
    location = call.backend.log_link(repo.owner, repo.name, job_id)
    return Reply(302, None, {"Location": location})


def rerun_failed_jobs(call: Call) -> Reply:
    repo = call.repo("write")
    run = _run(call, repo)
    try:
        call.backend.ci.rerun_failed_jobs(repo.owner, repo.name, run.id)
    except SandboxError as exc:
        raise ApiError(403, "This workflow run is not complete.") from exc
    return Reply(201, {})
