"""Session limits as rules: which limit stopped a session and what its Failed run says, the
watcher that stops it, the sized tmpfs mounts and the doctor's check, with scripted groups."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.unit.test_doctor import ScriptedOutside, by_name
from thirdshift.doctor import diagnose
from thirdshift.harnesses import SealedPaths
from thirdshift.harnesses.agent_sandbox import bwrap_options
from thirdshift.harnesses.limits import (
    LimitHit,
    LimitWatch,
    ScriptedGroups,
    SessionLimits,
    SessionLimitsUnavailable,
    Unbounded,
    limit_cause,
    probe_groups,
)
from thirdshift.harnesses.limits.cgroups import mounts, own_groups
from thirdshift.harnesses.limits.watch import DiskUse, disk_rule

LIMITS = SessionLimits(max_processes=64, memory_mb=256, tmpfs_mb=64, disk_mb=20, max_files=200)
HYBRID_MOUNTS = (
    "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n"
    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n"
)


Stop = threading.Event | None


def _nothing(_roots: Sequence[Path], _past: DiskUse | None, _stop: Stop) -> DiskUse:
    return DiskUse(0, 0)


def _twenty_mb(_roots: Sequence[Path], _past: DiskUse | None, _stop: Stop) -> DiskUse:
    return DiskUse(20 * 2**20, 200)


@pytest.mark.parametrize(
    ("hit", "setting", "value"),
    [
        (LimitHit("processes", "3 fork(s) refused"), "session_max_processes", "= 64 processes"),
        (LimitHit("memory", "1 process(es) killed"), "session_memory_mb", "= 256 MB of memory"),
        (LimitHit("disk", "25 MB more"), "session_disk_mb", "= 20 MB of disk"),
        (LimitHit("files", "201 files more"), "session_max_files", "= 200 files"),
    ],
)
def test_a_limit_met_is_a_cause_naming_the_limit_its_value_and_the_setting_to_raise(
    hit: LimitHit, setting: str, value: str
) -> None:
    """The cause names the session, the setting with its value, what was seen, and the fix."""
    cause = limit_cause("implement", hit, LIMITS)
    assert any(
        cause.startswith(f"implement session stopped: it {verb} more than {setting}")
        for verb in ("used", "tried to run", "made")
    )
    assert f"{setting} {value}" in cause
    assert f"({hit.detail})" in cause
    assert cause.endswith(f"raise {setting} if the work needs more")
    assert "bug" not in cause


def test_the_watcher_halts_the_session_at_the_first_limit_its_group_meets() -> None:
    """A fork refused in the group sets ``halt`` and is kept as the hit; the group is asked
    again at the end only when nothing was seen."""
    groups = ScriptedGroups(hits=[[None, None, LimitHit("processes", "1 fork(s) refused")]])
    group = groups.make("s", LIMITS)
    halt = threading.Event()
    with LimitWatch(group, LIMITS, [], halt, measure=_nothing) as watch:
        assert halt.wait(5)
    assert watch.hit == LimitHit("processes", "1 fork(s) refused")


def test_the_watcher_halts_a_session_that_grew_its_disk_past_the_budget() -> None:
    """Disk use is measured against what it was when the session started: 21 MB more than
    at the start is past a 20 MB budget."""
    limits = SessionLimits(disk_mb=20, disk_check_seconds=0.01)
    sizes = iter([500 * 2**20, 510 * 2**20, *([521 * 2**20] * 1000)])

    def measure(_roots: Sequence[Path], _past: DiskUse | None, _stop: Stop) -> DiskUse:
        return DiskUse(next(sizes), 10)

    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, [Path("/nowhere")], halt, measure=measure) as watch:
        assert halt.wait(5)
    assert watch.hit == LimitHit("disk", "21 MB more than when it started")


def test_the_watcher_does_not_halt_a_session_within_its_limits() -> None:
    """Growth up to the budget and a group with nothing to report leave the session alone."""
    limits = SessionLimits(disk_mb=20, disk_check_seconds=0.01)
    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, [], halt, measure=_twenty_mb) as watch:
        time.sleep(0.6)
    assert not halt.is_set()
    assert watch.hit is None


def test_more_files_than_session_max_files_since_the_start_is_a_hit() -> None:
    """Files are counted as growth, like disk: 201 more than at the start is past a cap of
    200, 200 more is not."""
    start = DiskUse(100 * 2**20, 1000)
    assert disk_rule(start, DiskUse(100 * 2**20, 1200), LIMITS) is None
    assert disk_rule(start, DiskUse(101 * 2**20, 1201), LIMITS) == LimitHit(
        "files", "201 files more than when it started"
    )


def test_the_disk_budget_is_named_first_and_a_scan_cut_short_says_at_least() -> None:
    """Past both limits, the disk is the hit; a scan that stopped early past a limit gives
    figures that are lower bounds, and the detail says so."""
    start = DiskUse(0, 0)
    both = DiskUse(21 * 2**20, 201, cut_short=True)
    assert disk_rule(start, both, LIMITS) == LimitHit(
        "disk", "at least 21 MB more than when it started"
    )
    files = DiskUse(0, 201, cut_short=True)
    assert disk_rule(start, files, LIMITS) == LimitHit(
        "files", "at least 201 files more than when it started"
    )


def test_a_directory_the_scan_could_not_read_is_the_hit_before_any_budget() -> None:
    """What is below an unreadable directory went uncounted, so the figures say nothing: the
    directory is the hit, and its cause names it and what to do, not a setting to raise."""
    hidden = DiskUse(4096, 1, cut_short=True, unreadable="issue-1/hide")
    assert disk_rule(DiskUse(0, 0), hidden, LIMITS) == LimitHit("unreadable", "issue-1/hide")
    past_both = DiskUse(21 * 2**20, 201, cut_short=True, unreadable="home/.cache")
    assert disk_rule(DiskUse(0, 0), past_both, LIMITS) == LimitHit("unreadable", "home/.cache")

    cause = limit_cause("implement", LimitHit("unreadable", "issue-1/hide"), LIMITS)
    assert cause.startswith(
        "implement session stopped: it made a directory thirdshift cannot read (issue-1/hide), "
        "which would hide its disk use from session_disk_mb and session_max_files; "
    ), cause
    assert "readable" in cause.split("; ", 1)[1]
    assert "raise" not in cause


def test_a_directory_already_unreadable_at_the_start_halts_the_session_at_once() -> None:
    """A baseline that could not be read measures nothing below the directory, so no growth
    there would ever be seen: the watch meets it on entering, before any disk check."""
    limits = SessionLimits(disk_check_seconds=60)
    measured: list[DiskUse | None] = []

    def measure(_roots: Sequence[Path], past: DiskUse | None, _stop: Stop) -> DiskUse:
        measured.append(past)
        return DiskUse(0, 0)

    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    hidden = DiskUse(4096, 1, cut_short=True, unreadable="issue-1/hide")
    with LimitWatch(group, limits, [], halt, measure=measure, baseline=hidden) as watch:
        assert halt.is_set()
    assert watch.hit == LimitHit("unreadable", "issue-1/hide")
    assert measured == []  # the baseline given is not measured again


def test_the_watcher_halts_a_session_that_made_more_files_than_its_cap() -> None:
    """Empty files take no disk: their number alone stops the session, and each scan is told
    to stop once past the start's figures plus the limits."""
    limits = SessionLimits(disk_mb=20, max_files=200, disk_check_seconds=0.01)
    asked: list[DiskUse | None] = []
    counts = iter([10, 110, *([211] * 1000)])

    def measure(_roots: Sequence[Path], past: DiskUse | None, _stop: Stop) -> DiskUse:
        asked.append(past)
        return DiskUse(5 * 2**20, next(counts))

    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, [Path("/nowhere")], halt, measure=measure) as watch:
        assert halt.wait(5)
    assert watch.hit == LimitHit("files", "201 files more than when it started")
    assert asked[0] is None
    assert asked[1] == DiskUse(25 * 2**20, 210)


def test_a_slow_disk_scan_does_not_delay_the_group_counters() -> None:
    """A scan that takes long (a million files) runs beside the counters: a fork refused
    meanwhile still halts the session at once, and stops the scan."""
    limits = SessionLimits(disk_check_seconds=0.01)
    scanning = threading.Event()
    stopped: list[bool] = []

    def measure(_roots: Sequence[Path], past: DiskUse | None, stop: Stop) -> DiskUse:
        if past is not None and stop is not None:
            scanning.set()
            stopped.append(stop.wait(30))
        return DiskUse(0, 0, cut_short=past is not None)

    refused = LimitHit("processes", "1 fork(s) refused")
    group = ScriptedGroups(hits=[[None, None, None, refused]]).make("s", limits)
    halt = threading.Event()
    with LimitWatch(group, limits, [], halt, measure=measure) as watch:
        assert scanning.wait(5)
        assert halt.wait(5)
    assert watch.hit == refused
    assert stopped == [True]  # the limit met stopped the scan under way


def test_leaving_the_watch_stops_a_disk_scan_under_way() -> None:
    """A session that ends while its disk is being counted does not wait for the count."""
    limits = SessionLimits(disk_check_seconds=0.01)
    scanning = threading.Event()
    stopped: list[bool] = []

    def measure(_roots: Sequence[Path], past: DiskUse | None, stop: Stop) -> DiskUse:
        if past is not None and stop is not None:
            scanning.set()
            stopped.append(stop.wait(30))
        return DiskUse(0, 0, cut_short=past is not None)

    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, [], threading.Event(), measure=measure) as watch:
        assert scanning.wait(5)
    assert watch.hit is None
    assert stopped == [True]


def test_an_oom_kill_that_ended_the_cli_before_the_watcher_looked_is_still_the_hit() -> None:
    """The group's counters are read once more when the watch ends."""
    memory = LimitHit("memory", "1 process(es) killed by the kernel's OOM killer")
    group = ScriptedGroups(hits=[[memory]]).make("s", LIMITS)
    with LimitWatch(group, LIMITS, [], threading.Event(), measure=_nothing) as watch:
        pass  # ends before the watcher's first look
    assert watch.hit == memory


def test_the_sandbox_tmpfs_mounts_are_sized_when_a_size_is_given(tmp_path: Path) -> None:
    """Each of /tmp, /var/tmp and /run is mounted with ``--size`` right before its
    ``--tmpfs``; without a size, bubblewrap's default stays."""
    paths = SealedPaths(tmp_path, tmp_path, tmp_path, hidden=(), scratch_bytes=64 * 2**20)
    options = bwrap_options(paths)
    for scratch in ("/tmp", "/var/tmp", "/run"):
        at = options.index(scratch)
        assert options[at - 3 : at] == ["--size", str(64 * 2**20), "--tmpfs"]
    unsized = bwrap_options(SealedPaths(tmp_path, tmp_path, tmp_path, hidden=()))
    assert "--size" not in unsized


def test_no_cgroup_with_pids_and_memory_stops_the_probe_naming_every_fix() -> None:
    """A machine with no pids or memory hierarchy bounds nothing: the probe refuses, naming
    root, delegation and the unsafe setting; the unsafe setting gives Unbounded."""
    files = {
        "/proc/self/mounts": "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
        "/proc/self/cgroup": "0::/nowhere-thirdshift-test\n",
    }
    with pytest.raises(SessionLimitsUnavailable) as raised:
        probe_groups(read=files.__getitem__)
    message = str(raised.value)
    assert "run thirdshift as root" in message
    assert "Delegate=yes" in message
    assert "set unsafe_unbounded_sessions = true" in message
    unbounded = probe_groups(unsafe_unbounded=True, read=files.__getitem__)
    assert isinstance(unbounded, Unbounded)
    assert unbounded.found == "none (unsafe_unbounded_sessions)"


def test_the_hierarchies_and_our_own_groups_are_read_from_proc() -> None:
    """v1 hierarchies by controller, the v2 mount, and our group in each."""
    found = mounts(HYBRID_MOUNTS)
    assert [(m.version, str(m.path)) for m in found] == [
        (1, "/sys/fs/cgroup/pids"),
        (1, "/sys/fs/cgroup/memory"),
        (2, "/sys/fs/cgroup/unified"),
    ]
    assert "pids" in found[0].controllers
    own = own_groups("8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/x\n0::/\n")
    assert own == {"pids": "/", "memory": "/process_api/abc", "cpu": "/x", "cpuacct": "/x", "": "/"}


def test_doctor_says_which_cgroup_bounds_sessions_and_warns_when_none_does() -> None:
    """PASS names what was found; the unsafe setting is a WARN naming the fix; no cgroup is
    a FAIL whose fix names delegation and the unsafe setting."""
    check = by_name(diagnose(ScriptedOutside()))["resource limits"]
    assert check.status == "PASS"
    assert check.detail.startswith("cgroup v1 (pids, memory, cpu) bounds each session: 512 ")
    unsafe = ScriptedOutside(settings_values={"unsafe_unbounded_sessions": True})
    warned = by_name(diagnose(unsafe))["resource limits"]
    assert warned.status == "WARN"
    assert "remove unsafe_unbounded_sessions" in warned.fix
    refused = ScriptedOutside(
        raises={
            "session_groups": SessionLimitsUnavailable(
                "no cgroup can bound a session's processes and memory here (x); run thirdshift "
                "as root (cgroup v1), or ... Delegate=yes ..., set unsafe_unbounded_sessions"
            )
        }
    )
    failed = by_name(diagnose(refused))["resource limits"]
    assert failed.status == "FAIL"
    assert "Delegate=yes" in failed.fix
