"""What the encoded forms of known secrets (adr/0043) cost the scrubber on ordinary text.

Run from the repository root: ``.venv/bin/python bench/scrub_known_forms.py [--megabytes N]``.

A Run's scrubber knows a handful of secrets (the token, the model key, a few named variables);
each has about twenty encoded forms, each looked for in every text. The script scrubs N MB of
ordinary Session-log-like text and short lines with 1, 5 and 20 known secrets, with their forms
and with the plain values only, and prints the throughput of each. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import time

from thirdshift.scrub import KNOWN_VALUE, Scrubber

ORDINARY = (
    '{"type":"tool_result","content":"CI passed on 3f2a9c1b7e; see src/app.py and '
    'aGVsbG8gd29ybGQK 0123456789abcdef","is_error":false}\n'
)


class PlainOnly(Scrubber):
    """The scrubber with the plain values only, as before adr/0043."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__(secrets)
        self._known = tuple((text, kind) for text, kind in self._known if kind == KNOWN_VALUE)
        self._cuts = {
            ending: [cut for cut in cuts if cut[1] == KNOWN_VALUE]
            for ending, cuts in self._cuts.items()
        }


def secrets(count: int) -> list[str]:
    return [f"known-secret-number-{i:03d}-of-the-bench" for i in range(count)]


def rate(scrub: Scrubber, texts: list[str]) -> float:
    """Megabytes a second through ``scrub``."""
    size = sum(map(len, texts))
    started = time.perf_counter()
    for text in texts:
        scrub(text)
    return size / (time.perf_counter() - started) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0)
    size = int(parser.parse_args().megabytes * 1_000_000)
    whole = [ORDINARY * (size // len(ORDINARY))]
    lines = [ORDINARY] * (size // len(ORDINARY))
    print(f"{'secrets':>8} {'forms':>6} {'one text MB/s':>14} {'lines MB/s':>11}")
    for count in (1, 5, 20):
        for label, scrub in (
            ("plain", PlainOnly(secrets(count))),
            ("all", Scrubber(secrets(count))),
        ):
            print(f"{count:>8} {label:>6} {rate(scrub, whole):>14.1f} {rate(scrub, lines):>11.1f}")


if __name__ == "__main__":
    main()
