"""The daemon's open-file limit, for real: a fresh Python process whose limits the test sets
first, then ``raise_descriptor_limit`` as the daemon calls it at start."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from thirdshift.bootstrap.limits import ENOUGH_DESCRIPTORS

RAISE = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
from thirdshift.bootstrap.limits import raise_descriptor_limit
said = raise_descriptor_limit()
print(json.dumps({"said": said, "limit": resource.getrlimit(resource.RLIMIT_NOFILE)}))
"""


def raised(soft: int, hard: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", RAISE, str(soft), str(hard)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_the_soft_limit_is_raised_to_the_hard_one_without_a_word() -> None:
    """systemd's soft limit of 1,024 becomes the hard limit; nothing is said."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard < ENOUGH_DESCRIPTORS:
        pytest.fail(f"this machine's hard open-file limit ({hard}) is needed finite and >= 4096")
    assert raised(1024, hard) == {"said": None, "limit": [hard, hard]}


def test_a_hard_limit_too_low_is_named_with_the_fix() -> None:
    """Under 4,096 even at the hard limit: one warning line naming the limit and LimitNOFILE."""
    assert raised(256, 512) == {
        "said": "warning: the daemon may open only 512 files at once (its hard limit is 512); "
        "a few sessions at once may exhaust them: raise the limit (LimitNOFILE=65536 in the "
        "systemd unit, or ulimit -n 65536 in its shell)",
        "limit": [512, 512],
    }
