"""Pre-tokenizer speed: the hand-written scanners vs regex.findall, MB/s per corpus and pattern.

Usage: python benches/bench_pretokenize.py [corpus ...]   (default: every ../shared/corpora file
and the synthetic worst cases below)
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
from bpecore.pretokenize import (
    CL100K_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    QWEN2_PATTERN,
    R50K_PATTERN,
    TEKKEN_PATTERN,
    pattern_kind,
)

CORPORA_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpora"
PATTERNS = {
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
    "r50k": R50K_PATTERN,
    "llama3": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "tekken": TEKKEN_PATTERN,
}
RUNS = 5
#: ~1 MB inputs that make the scanners work hardest: o200k reads each capitals run 3 times;
#: 4-byte letters take the slowest decoding path.
WORST_CASES = {
    "worst_o200k_caps": ("\u0301" + "A" * 1000 + ".") * 1000,
    "worst_4byte_letters": "\U00020000" * 250_000,
}


def median_seconds(fn):
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(names):
    inputs = {p.name.split(".")[0]: p for p in sorted(CORPORA_DIR.glob("*.txt.gz"))}
    inputs.update(WORST_CASES)
    if names:
        inputs = {k: v for k, v in inputs.items() if k in names}
    print(
        f"{'input':20} {'pattern':7} {'pieces':>8} {'scanner MB/s':>13} {'regex MB/s':>11} {'speedup':>8}"
    )
    for label, source in inputs.items():
        text = (
            source
            if isinstance(source, str)
            else gzip.decompress(source.read_bytes()).decode("utf-8")
        )
        data = text.encode("utf-8")
        mb = len(data) / 1e6
        for name, pattern in PATTERNS.items():
            kind = pattern_kind(pattern)
            compiled = regex.compile(pattern)
            pieces = pretokenize._count_pieces(kind, data)
            assert pieces == len(compiled.findall(text))
            scan = mb / median_seconds(lambda: pretokenize._count_pieces(kind, data))
            rx = mb / median_seconds(lambda: compiled.findall(text))
            print(f"{label:20} {name:7} {pieces:8d} {scan:13.1f} {rx:11.1f} {scan / rx:7.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
