"""bubblewrap refused its user namespace: the cause named from bwrap's words and the kernel's
settings, with the fix for that cause (Ubuntu's AppArmor restriction, Debian's switch,
user.max_user_namespaces), and the generic fix for anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from thirdshift.harnesses import AgentSandboxUnavailable, probe
from thirdshift.harnesses.userns import GENERIC_FIX, UsernsSettings, refusal

BWRAP = "/usr/bin/bwrap"
UBUNTU_2404 = UsernsSettings(
    apparmor_restrict="1\n", unprivileged_clone="1\n", max_user_namespaces="63439\n"
)
"""A stock Ubuntu 24.04 kernel: Debian's switch on, AppArmor restricting."""
UBUNTU_LIFTED = UsernsSettings(
    apparmor_restrict="0\n", unprivileged_clone="1\n", max_user_namespaces="63439\n"
)
DEBIAN_12 = UsernsSettings(max_user_namespaces="96367\n")
DEBIAN_OLD_OFF = UsernsSettings(unprivileged_clone="0\n", max_user_namespaces="15000\n")
DEBIAN_WORDS = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl "
    "kernel.unprivileged_userns_clone=1'.\n"
)
NO_SPACE_WORDS = "bwrap: Creating new namespace failed: No space left on device\n"
APPARMOR_WORDS = (
    "bwrap: setting up uid map: Permission denied\n",
    "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n",
    "bwrap: Failed to make / slave: Permission denied\n",
    "unshare: write failed /proc/self/uid_map: Operation not permitted\n",
)
PROFILE = "profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }"
APPARMOR_SYSCTL = "sysctl kernel.apparmor_restrict_unprivileged_userns=0"


@pytest.mark.parametrize("stderr", APPARMOR_WORDS)
def test_apparmor_refusal_names_the_profile_and_the_sysctl(stderr: str) -> None:
    """Under Ubuntu's restriction each of bwrap's refusals names AppArmor, a profile for bwrap
    loaded with apparmor_parser, and the sysctl that lifts the restriction, kept in
    /etc/sysctl.d/."""
    message = refusal(stderr, UBUNTU_2404, BWRAP)

    cause, _, fix = message.partition("; ")
    assert cause == (
        "AppArmor restricts unprivileged user namespaces "
        "(kernel.apparmor_restrict_unprivileged_userns = 1)"
    )
    assert "/etc/apparmor.d/bwrap" in fix
    assert '"abi <abi/4.0>," "include <tunables/global>"' in fix
    assert f'"{PROFILE}"' in fix
    assert "apparmor_parser -r /etc/apparmor.d/bwrap" in fix
    assert f"or lift the restriction for every program: {APPARMOR_SYSCTL}" in fix
    assert "/etc/sysctl.d/" in fix
    assert "unprivileged_userns_clone" not in message
    assert "\n" not in message


def test_the_apparmor_profile_names_bwrap_where_it_is() -> None:
    """AppArmor attaches a profile by the program's path: the one given, not /usr/bin/bwrap."""
    message = refusal(APPARMOR_WORDS[0], UBUNTU_2404, "/opt/bubblewrap/bin/bwrap")

    assert "profile bwrap /opt/bubblewrap/bin/bwrap flags=(unconfined) { userns, }" in message
    assert "/usr/bin/bwrap" not in message


def test_a_permission_refusal_with_the_restriction_lifted_is_not_blamed_on_apparmor() -> None:
    """With kernel.apparmor_restrict_unprivileged_userns = 0, AppArmor is not the cause: the
    generic fix."""
    message = refusal(APPARMOR_WORDS[0], UBUNTU_LIFTED, BWRAP)

    assert "AppArmor" not in message
    assert message.endswith(GENERIC_FIX)


def test_a_permission_refusal_without_apparmor_keeps_the_generic_fix() -> None:
    """Where the kernel has no AppArmor switch (Debian 12, a container), the same words get the
    generic fix."""
    message = refusal(APPARMOR_WORDS[0], DEBIAN_12, BWRAP)

    assert message == f"user namespaces may be turned off here; {GENERIC_FIX}"


def test_an_unknown_refusal_keeps_the_generic_fix() -> None:
    """bwrap's words that name no known cause get the generic fix, AppArmor restricting or
    not."""
    stderr = "bwrap: Unexpected capabilities but not setuid, old file caps config?\n"
    for kernel in (UBUNTU_2404, DEBIAN_12, UsernsSettings()):
        assert refusal(stderr, kernel, BWRAP) == (
            f"user namespaces may be turned off here; {GENERIC_FIX}"
        )


def test_debians_refusal_names_its_own_sysctl() -> None:
    """Debian's kernel patch: kernel.unprivileged_userns_clone=1, and nothing of
    max_user_namespaces or AppArmor, whether bwrap's words or the kernel's setting say it."""
    expected = (
        "the kernel refuses unprivileged user namespaces (kernel.unprivileged_userns_clone = 0); "
        "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, and in /etc/sysctl.d/ "
        "to keep it)"
    )
    assert refusal(DEBIAN_WORDS, DEBIAN_OLD_OFF, BWRAP) == expected
    assert refusal(DEBIAN_WORDS, UsernsSettings(), BWRAP) == expected
    assert refusal("unshare: unshare failed: Operation not permitted", DEBIAN_OLD_OFF, BWRAP) == (
        expected
    )


def test_debians_switch_off_wins_over_apparmor() -> None:
    """An Ubuntu kernel with Debian's switch off refuses every namespace before AppArmor is
    asked: the fix is Debian's sysctl."""
    kernel = UsernsSettings(apparmor_restrict="1\n", unprivileged_clone="0\n")
    message = refusal(DEBIAN_WORDS, kernel, BWRAP)

    assert "sysctl kernel.unprivileged_userns_clone=1" in message
    assert "AppArmor" not in message


def test_no_user_namespaces_allowed_names_max_user_namespaces() -> None:
    """user.max_user_namespaces = 0: raise it, and nothing of Debian's switch."""
    kernel = UsernsSettings(unprivileged_clone="1\n", max_user_namespaces="0\n")

    assert refusal(NO_SPACE_WORDS, kernel, BWRAP) == (
        "the kernel allows no user namespace (user.max_user_namespaces = 0); allow user "
        "namespaces (sysctl user.max_user_namespaces=10000, and in /etc/sysctl.d/ to keep it)"
    )


def test_user_namespaces_used_up_raises_the_limit_past_its_value() -> None:
    """No space left with a limit above 0: every namespace it allows is in use; the fix raises
    it past its value."""
    kernel = UsernsSettings(max_user_namespaces="8000\n")

    assert refusal(NO_SPACE_WORDS, kernel, BWRAP) == (
        "the kernel allows no more user namespaces (user.max_user_namespaces = 8000, all in "
        "use); allow user namespaces (sysctl user.max_user_namespaces=16000, and in "
        "/etc/sysctl.d/ to keep it)"
    )


def test_a_refusal_reaches_the_sandbox_error_with_its_fix_after_the_cause(tmp_path: Path) -> None:
    """probe runs the bwrap it finds; its refusal becomes the error's cause, and the fix comes
    after the first "; " (where doctor cuts a message into its problem and its fix)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    bwrap = directory / "bwrap"
    bwrap.write_text(f"#!/bin/sh\nprintf '%s' \"{DEBIAN_WORDS}\" >&2\nexit 1\n")
    bwrap.chmod(0o755)

    with pytest.raises(AgentSandboxUnavailable) as raised:
        probe(str(directory))

    problem, _, fix = str(raised.value).partition("; ")
    assert problem == (
        f"the agent sandbox cannot be made: {bwrap} cannot seal a process here "
        f"({DEBIAN_WORDS.strip()}): the kernel refuses unprivileged user namespaces "
        "(kernel.unprivileged_userns_clone = 0)"
    )
    assert fix == (
        "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, and in /etc/sysctl.d/ "
        "to keep it); or, knowing the agent can then read thirdshift's token, set "
        "unsafe_agent_without_sandbox = true"
    )
