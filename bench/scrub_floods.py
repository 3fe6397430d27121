"""How fast the scrubber gets through a flood of a shape's own prefix, shape by shape.

Run from the repository root: ``.venv/bin/python bench/scrub_floods.py [--megabytes N]``.

A flood is the worst case of a scrubber that tries a shape wherever its prefix occurs: every
few characters there is a new place to try it, and a try that read on to the end of the run
would make the whole quadratic. For each shape the scrubber knows (``shape_prefixes``) and each
of its prefixes, the script scrubs N MB made of the prefix repeated, bare and with each of a few
separators after it (``sk-sk-``, ``sk--sk--``, ``sk-.sk-.``...), and prints the slowest of these
per prefix, the worst prefix of all, and ordinary text of the same size for comparison. Figures,
not assertions: ``tests/unit/test_scrub_floods.py`` holds the bound the suite enforces.
"""

from __future__ import annotations

import argparse
import time

from thirdshift.scrub import Scrubber, shape_prefixes

# What may follow a prefix in a flood: nothing, and the separators a token's run takes in.
SEPARATORS = ("", "-", ".", "=", ":", " ", "/", "\\n")
ORDINARY = 'CI passed on 3f2a9c1b7e; see src/app.py and {"path": "a/b", "exit": 0}\n'


def flood(unit: str, size: int) -> str:
    return unit * (size // len(unit))


def seconds(scrub: Scrubber, text: str) -> float:
    started = time.perf_counter()
    scrub(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0)
    size = int(parser.parse_args().megabytes * 1_000_000)
    scrub = Scrubber(["a-known-secret-value"])
    megabytes = size / 1_000_000
    ordinary = seconds(scrub, flood(ORDINARY, size))
    print(f"ordinary text: {megabytes / ordinary:8.1f} MB/s")
    worst: tuple[float, str, str] = (0.0, "", "")
    for kind, prefix in shape_prefixes():
        took, unit = max((seconds(scrub, flood(prefix + s, size)), prefix + s) for s in SEPARATORS)
        print(f"{kind:32} {unit!r:24} {megabytes / took:8.1f} MB/s")
        worst = max(worst, (took, kind, unit))
    took, kind, unit = worst
    print(f"worst: {kind} flooded with {unit!r}: {megabytes / took:.1f} MB/s ({took:.2f} s)")


if __name__ == "__main__":
    main()
