"""A Run's end is announced once: ready, merged, refused, failed or interrupted, each with its
facts, scrubbed; never a second time for the same Run; a failing target only warns."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PLANTED_TOKEN, PR_TEXT, READY, RunWorld
from tests.support.scripted_sessions import commit_file
from thirdshift.records import Run
from thirdshift.run_states import RunEnd
from thirdshift.runs.notices import announce_run_end
from thirdshift.runs.rules.post_mortem import AnnouncedEnd
from thirdshift.scrub import Scrubber
from thirdshift.sessions import SessionFailed, SessionInterrupted


def widget(world: RunWorld) -> int:
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    return number


def test_a_ready_pull_request_is_announced_once_with_its_facts(world: RunWorld) -> None:
    target = world.notify_to()
    number = widget(world)

    assert world.run(number) == 0

    [(notice, _body)] = target.sent
    [pull] = world.github.pull_requests()
    assert (notice.event, notice.state, notice.kind, notice.run_id) == (
        "run.ended",
        "ready",
        "run",
        1,
    )
    assert (notice.repository, notice.issue_number) == ("acme/widgets", number)
    assert notice.issue_url.endswith(f"/issues/{number}")
    assert notice.pull_request_url == pull.html_url
    assert notice.cause is None
    assert notice.post_mortem is not None
    assert "implement · scripted · ended" in notice.post_mortem
    assert world.lines[-1] == "notified scripted of Run 1 (ready)"


def test_a_merge_run_is_announced_as_merged(world: RunWorld) -> None:
    target = world.notify_to()
    assert world.run(widget(world), merge=True) == 0
    [(notice, _body)] = target.sent
    assert (notice.state, notice.kind) == ("merged", "merge")


def test_a_policy_refusal_is_announced_as_refused(world: RunWorld) -> None:
    target = world.notify_to()
    number = widget(world)
    world.github.merge_refusals.extend(["required review missing", "required review missing"])
    assert world.run(number, merge=True) == 1
    [(notice, _body)] = target.sent
    assert notice.state == "refused"
    assert (notice.cause or "").startswith("GitHub refused to merge at ")
    assert notice.pull_request_url is not None


def test_a_failed_run_is_announced_scrubbed_with_its_post_mortem(world: RunWorld) -> None:
    target = world.notify_to()
    number = world.github.add_issue("Add a widget", "", [READY])

    def fail(worktree: Path, prompt: str) -> str:
        raise SessionFailed(f"the CLI died printing {PLANTED_TOKEN}")

    world.sessions.plays["implement"] = fail

    assert world.run(number) == 1

    [(notice, body)] = target.sent
    assert notice.state == "failed"
    assert notice.cause == "the CLI died printing [REDACTED]"
    assert "error: the CLI died printing [REDACTED]" in (notice.post_mortem or "")
    assert PLANTED_TOKEN not in body.decode()
    # The cause and the session log stay the last two lines, as a failure always ends.
    assert world.lines[-2] == "the CLI died printing [REDACTED]"


def test_an_interrupted_run_is_announced_as_interrupted(world: RunWorld) -> None:
    target = world.notify_to()
    number = world.github.add_issue("Add a widget", "", [READY])

    def stopped(worktree: Path, prompt: str) -> str:
        world.interrupt.set()
        raise SessionInterrupted("interrupted")

    world.sessions.plays["implement"] = stopped

    assert world.run(number) == 1
    [(notice, _body)] = target.sent
    assert notice.state == "interrupted"


def test_a_failing_target_is_a_warning_and_the_run_ends_as_it_would(world: RunWorld) -> None:
    broken = world.notify_to("webhook https://hooks.test")
    broken.fail_next(["answered 500"])
    other = world.notify_to("mailto (notify_urls entry 1)")

    assert world.run(widget(world)) == 0

    assert "warning: could not notify webhook https://hooks.test of Run 1: answered 500" in (
        world.lines
    )
    assert len(other.sent) == 1
    [run] = world.store.list_runs()
    assert run.state == "succeeded"


def test_a_run_end_is_never_announced_twice(world: RunWorld) -> None:
    """Announcing the same end again (recorded twice, or by a restarted process) sends nothing:
    the database holds the mark."""
    target = world.notify_to()
    assert world.run(widget(world)) == 0
    [run] = world.store.list_runs()

    again = announce(world, run)

    assert again == []
    assert len(target.sent) == 1


def test_nothing_configured_leaves_the_run_unmarked(world: RunWorld) -> None:
    """With no target the end is not marked announced, so one configured later is not
    told it already was."""
    assert world.run(widget(world)) == 0
    [run] = world.store.list_runs()
    assert world.store.claim_notice(run.id) is True


def test_an_end_the_database_could_not_record_is_not_announced_silently(world: RunWorld) -> None:
    """The Run's row still says running (recording its end failed): no message can be claimed,
    and a warning says so rather than nothing."""
    target = world.notify_to()
    run = world.store.start_run(world.store.ensure_repository("acme", "widgets"), 7)

    lines = announce(world, run)

    assert target.sent == []
    assert lines == [
        f"warning: could not announce the end of Run {run.id}: the database does not record "
        "that it ended"
    ]


def announce(world: RunWorld, run: Run) -> list[str]:
    from thirdshift.notify import TargetNotifier

    lines: list[str] = []
    announce_run_end(
        store=world.store,
        notifier=TargetNotifier(world.targets, scrub=Scrubber(), progress=lines.append),
        scrub=Scrubber(),
        progress=lines.append,
        run=run,
        end=AnnouncedEnd("https://github.test/acme/widgets/issues/1", RunEnd.READY),
    )
    return lines
