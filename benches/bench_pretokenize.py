"""Pre-tokenizer speed: the hand-written scanners vs regex.findall, MB/s per corpus and pattern.

Usage: python benches/bench_pretokenize.py [corpus ...]   (default: every ../shared/corpora file)
Reports the median of 5 runs over the whole file (UTF-8 bytes / seconds). The scanner time is
pretokenize._count_pieces (nogil loop, no Python objects); regex is regex.findall on the str.
"""

import gzip
import statistics
import sys
import time
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-place build, if not installed
from bpecore import pretokenize
from bpecore.pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN, pattern_kind

CORPORA_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpora"
PATTERNS = {"cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN, "r50k": R50K_PATTERN}
RUNS = 5


def median_seconds(fn):
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(names):
    paths = sorted(CORPORA_DIR.glob("*.txt.gz"))
    if names:
        paths = [p for p in paths if p.name.split(".")[0] in names]
    print(f"{'corpus':16} {'pattern':7} {'pieces':>8} {'scanner MB/s':>13} {'regex MB/s':>11} {'speedup':>8}")
    for path in paths:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        data = text.encode("utf-8")
        mb = len(data) / 1e6
        for name, pattern in PATTERNS.items():
            kind = pattern_kind(pattern)
            compiled = regex.compile(pattern)
            pieces = pretokenize._count_pieces(kind, data)
            assert pieces == len(compiled.findall(text))
            scan = mb / median_seconds(lambda: pretokenize._count_pieces(kind, data))
            rx = mb / median_seconds(lambda: compiled.findall(text))
            print(f"{path.name.split('.')[0]:16} {name:7} {pieces:8d} {scan:13.1f} {rx:11.1f} {scan / rx:7.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
