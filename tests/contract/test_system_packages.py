"""scripts/system-packages: the system packages pip and npm cannot bring (bubblewrap, socat,
chromium), installed with apt-get when run as root, or named in the one command to run; and,
where Ubuntu's AppArmor keeps bwrap from sealing, its two fixes said."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-packages"


def _bin_without_the_packages(tmp_path: Path, *, apt_get: bool) -> Path:
    """A PATH directory with the shell tools the script uses and none of the packages; with
    ``apt_get``, an apt-get that records its arguments (no package is really installed)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in ("bash", "id"):
        found = shutil.which(tool)
        assert found is not None
        (directory / tool).symlink_to(found)
    if apt_get:
        recorder = directory / "apt-get"
        recorder.write_text(f'#!{shutil.which("bash")}\necho "$*" >> "{tmp_path}/apt-get.log"\n')
        recorder.chmod(0o755)
    return directory


def _run(path: Path, *prefix: str, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, str(script)],
        env={"PATH": str(path), "HOME": "/"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_as_root_it_installs_the_missing_packages_with_apt_get(tmp_path: Path) -> None:
    """Run as root with apt-get, the missing packages are installed with one apt-get install."""
    assert os.geteuid() == 0, "this test runs the script as root (CI and the test machine do)"
    result = _run(_bin_without_the_packages(tmp_path, apt_get=True))

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "apt-get.log").read_text().splitlines() == [
        "update -q",
        "install -y -q bubblewrap socat chromium",
    ]
    assert "installing bubblewrap socat chromium with apt-get" in result.stderr


def test_as_another_user_it_prints_the_one_command_to_run(tmp_path: Path) -> None:
    """Not root: nothing is installed; stderr names the one command, and the install goes on."""
    # Another user can reach neither pytest's private directories nor this checkout.
    shared = Path(tempfile.mkdtemp(prefix="system-packages-"))
    try:
        shared.chmod(0o755)
        directory = _bin_without_the_packages(shared, apt_get=True)
        script = shared / "system-packages"
        shutil.copy(SCRIPT, script)
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "setpriv (util-linux) runs the script as another user"
        result = _run(
            directory, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", script=script
        )
        called = (shared / "apt-get.log").exists()
    finally:
        shutil.rmtree(shared)

    assert result.returncode == 0, result.stderr
    assert not called
    assert result.stderr.strip() == (
        "install: missing system packages; run: sudo apt-get install -y bubblewrap socat chromium"
    )


def _bwrap(directory: Path, *, seals: bool) -> None:
    """A stand-in bwrap in ``directory`` that seals (exits 0) or is refused (exits 1)."""
    bwrap = directory / "bwrap"
    bwrap.write_text(f"#!{shutil.which('bash')}\nexit {0 if seals else 1}\n")
    bwrap.chmod(0o755)


def test_with_every_package_present_it_does_nothing(tmp_path: Path) -> None:
    """Where bwrap (one that seals), socat and chromium are all on PATH, apt-get is never
    called and nothing is said."""
    directory = _bin_without_the_packages(tmp_path, apt_get=True)
    _bwrap(directory, seals=True)
    for program in ("socat", "chromium"):
        (directory / program).symlink_to(directory / "bash")
    result = _run(directory)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert not (tmp_path / "apt-get.log").exists()


def test_a_refused_bwrap_is_blamed_on_apparmor_only_where_the_kernel_restricts(
    tmp_path: Path,
) -> None:
    """A bwrap that cannot seal gets AppArmor's two fixes (a profile, or the sysctl) exactly
    where kernel.apparmor_restrict_unprivileged_userns reads 1 on this host; the install goes
    on either way."""
    directory = _bin_without_the_packages(tmp_path, apt_get=True)
    _bwrap(directory, seals=False)
    for program in ("socat", "chromium"):
        (directory / program).symlink_to(directory / "bash")
    restrict = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    restricted = restrict.exists() and restrict.read_text().strip() == "1"
    result = _run(directory)

    assert result.returncode == 0, result.stderr
    if not restricted:
        assert result.stderr == ""
        return
    assert "AppArmor restricts unprivileged user" in result.stderr
    assert f"profile bwrap {directory / 'bwrap'} flags=(unconfined) {{ userns, }}" in (
        result.stderr
    )
    assert "sudo apparmor_parser -r /etc/apparmor.d/bwrap" in result.stderr
    assert "sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0" in result.stderr
