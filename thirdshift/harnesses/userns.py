"""Why bubblewrap was refused the user namespace it seals in, and the fix for that cause.

A pure reading: ``refusal`` takes what bwrap wrote on stderr and what the kernel's user-namespace
settings read (``UsernsSettings``, read by the adapter, ``agent_sandbox``) and returns one
message, the cause, then ``"; "``, then its fix. The refusals it knows:

- Ubuntu 23.10 and later: AppArmor lets no unconfined program without a profile saying ``userns``
  use the user namespaces it makes (``kernel.apparmor_restrict_unprivileged_userns = 1``, the
  default): bwrap then fails as it sets up the namespace (``setting up uid map: Permission
  denied``, ``Failed to make / slave: Permission denied``, ``loopback: Failed RTM_NEWADDR:
  Operation not permitted``);
- Debian's kernel patch (``kernel.unprivileged_userns_clone = 0``): ``No permissions to
  creating new namespace``;
- ``user.max_user_namespaces`` at 0, or every namespace it allows in use: ``Creating new
  namespace failed: No space left on device``.

Anything else keeps the generic fix: allow user namespaces.
"""

from __future__ import annotations

from dataclasses import dataclass

APPARMOR_RESTRICT = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
"""Ubuntu's switch (AppArmor 4): 1 restricts unprivileged user namespaces to programs whose
profile allows them."""
UNPRIVILEGED_CLONE = "/proc/sys/kernel/unprivileged_userns_clone"
"""Debian's switch (a kernel patch, in Ubuntu's kernels too): 0 refuses every unprivileged user
namespace."""
MAX_USER_NAMESPACES = "/proc/sys/user/max_user_namespaces"
"""How many user namespaces each user may hold at once; 0 allows none."""

SYSCTL_KEPT = "and in /etc/sysctl.d/ to keep it"
GENERIC_FIX = (
    "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
    "user.max_user_namespaces > 0)"
)
_ENOUGH_NAMESPACES = 10000
"""What to raise ``user.max_user_namespaces`` to, at least: room for a daemon's sessions."""
_DEBIAN_SAYS = ("no permissions to creating new namespace", "unprivileged_userns_clone")
_NO_SPACE = "no space left on device"
_REFUSED = ("permission denied", "operation not permitted")


@dataclass(frozen=True)
class UsernsSettings:
    """What the kernel's user-namespace settings read, each as its file's text, or None where
    this kernel has no such file."""

    apparmor_restrict: str | None = None
    """``APPARMOR_RESTRICT``."""
    unprivileged_clone: str | None = None
    """``UNPRIVILEGED_CLONE``."""
    max_user_namespaces: str | None = None
    """``MAX_USER_NAMESPACES``."""


def refusal(stderr: str, kernel: UsernsSettings, bwrap: str) -> str:
    """Why bwrap (at ``bwrap``, its real path: an AppArmor profile names that) failed with
    ``stderr``, given what ``kernel`` says, and the fix: ``"<cause>; <fix>"``."""
    said = stderr.lower()
    limit = _number(kernel.max_user_namespaces)
    if any(words in said for words in _DEBIAN_SAYS) or _number(kernel.unprivileged_clone) == 0:
        return (
            "the kernel refuses unprivileged user namespaces (kernel.unprivileged_userns_clone "
            "= 0); allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            f"{SYSCTL_KEPT})"
        )
    if _NO_SPACE in said or limit == 0:
        return _max_user_namespaces(limit)
    if _number(kernel.apparmor_restrict) == 1 and any(words in said for words in _REFUSED):
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1); let bwrap make them with an "
            "AppArmor profile, /etc/apparmor.d/bwrap holding the three lines "
            f'"abi <abi/4.0>," "include <tunables/global>" "{apparmor_profile(bwrap)}", loaded '
            "by apparmor_parser -r /etc/apparmor.d/bwrap; or lift the restriction for every "
            f"program: sysctl kernel.apparmor_restrict_unprivileged_userns=0 ({SYSCTL_KEPT})"
        )
    return f"user namespaces may be turned off here; {GENERIC_FIX}"


def apparmor_profile(bwrap: str) -> str:
    """The profile line that lets the program at ``bwrap`` make user namespaces."""
    return f"profile bwrap {bwrap} flags=(unconfined) {{ userns, }}"


def _max_user_namespaces(limit: int | None) -> str:
    if limit == 0:
        cause = "the kernel allows no user namespace (user.max_user_namespaces = 0)"
    elif limit is None:
        cause = "the kernel allows no more user namespaces (user.max_user_namespaces)"
    else:
        cause = (
            "the kernel allows no more user namespaces "
            f"(user.max_user_namespaces = {limit}, all in use)"
        )
    raised = max(_ENOUGH_NAMESPACES, 2 * (limit or 0))
    return (
        f"{cause}; allow user namespaces (sysctl user.max_user_namespaces={raised}, {SYSCTL_KEPT})"
    )


def _number(text: str | None) -> int | None:
    """A setting's value, or None where its file is missing or reads as no number."""
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None
