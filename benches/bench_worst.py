"""Worst cases, every family: each operation on a run of one character, at two sizes.

    python benches/bench_worst.py [--size 1000000] [--families gpt2,qwen2,...] [--fills a,space]

For each family of ``bench_open_models.py`` (built the same way, offline) and each fill (a run
of one letter, of spaces, of one CJK character, of one digit), times on ``size / 4`` and on
``size`` characters of it:

- ``count``, ``encode``, ``count_till_limit`` (no limit reached);
- ``split_at`` and ``split_at_end`` at ``n`` = 1,000 and 10,000 (their windows grow with ``n``);
- ``interval``: an interval counter of the text and 50 queries of 5,000 characters;
- ``chunk``: ``bpecore.chunk`` at 512 tokens;
- ``append``: the appending counter, one character per push (over ``size / 10`` and
  ``size / 40`` characters: a Python call per character);
- ``prepend``: the same with the prepending counter.

Cells: process CPU seconds at the large size, and the ratio large / small (linear is 4; a ratio
of 16 is quadratic). A cell that passes ``--limit`` seconds is stopped and shown as ``>limit``.
The machine is shared: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benches"))

import bench_open_models as bom  # noqa: E402

import bpecore  # noqa: E402

FILLS = {"a": "a", "space": " ", "cjk": "日", "digit": "7"}


class _Late(Exception):
    pass


def _stop(*args):
    raise _Late


def timed(func, limit: float) -> float:
    """Process seconds of ``func()``, or inf once it passes ``limit`` seconds of wall time."""
    signal.signal(signal.SIGALRM, _stop)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.process_time()
    try:
        func()
        return time.process_time() - start
    except _Late:
        return float("inf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def operations(enc: bpecore.Encoding, text: str) -> dict:
    size = len(text)
    stream = text[: max(size // 10, 1)]

    def intervals():
        counter = enc.interval_counter(text)
        for i in range(0, size, max(size // 50, 1)):
            counter.count(i, min(size, i + 5000))

    def append():
        counter = enc.appendable_counter()
        for char in stream:
            counter.push(char)

    def prepend():
        counter = enc.prependable_counter()
        for char in reversed(stream):
            counter.push(char)

    return {
        "count": lambda: enc.count(text),
        "encode": lambda: enc.encode_ordinary(text),
        "count_till_limit": lambda: enc.count_till_limit(text, 10**9),
        "split_at 1k": lambda: enc.split_at(text, 1000),
        "split_at 10k": lambda: enc.split_at(text, 10000),
        "split_at_end 1k": lambda: enc.split_at_end(text, 1000),
        "split_at_end 10k": lambda: enc.split_at_end(text, 10000),
        "interval": intervals,
        "chunk": lambda: bpecore.chunk(text, enc, max_tokens=512),
        "append": append,
        "prepend": prepend,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--families", default=",".join(bom.FAMILIES))
    parser.add_argument("--fills", default=",".join(FILLS))
    parser.add_argument("--limit", type=float, default=60.0)
    args = parser.parse_args()
    fills = args.fills.split(",")
    names = list(operations(bpecore.get_encoding("cl100k_base"), "x"))
    print(f"size {args.size:,} characters; cells: seconds at that size (ratio to size / 4)")
    print("| family | fill | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    with tempfile.TemporaryDirectory() as directory:
        for family in args.families.split(","):
            try:
                enc = bom.build(family, directory)[0]
            except ImportError as e:
                print(f"| {family} | skipped: {e.name} is missing |")
                continue
            for fill in fills:
                big = FILLS[fill] * args.size
                small = FILLS[fill] * (args.size // 4)
                cells = []
                for name in names:
                    t_small = timed(operations(enc, small)[name], args.limit)
                    t_big = timed(operations(enc, big)[name], args.limit)
                    if t_big == float("inf"):
                        cells.append(f">{args.limit:g}")
                    else:
                        cells.append(f"{t_big:.3f} ({t_big / max(t_small, 0.002):.1f}x)")
                print(f"| {family} | {fill} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
