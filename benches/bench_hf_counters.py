"""1 MB of one character pushed one character at a time through Qwen2's GGUF vocabulary.

Process seconds of both streaming counters, and of the recount per push they replaced (at 10 K
and 20 K characters, with its 1 MB time by n²). Needs build/gguf-vocabs (scripts/gguf_vocabs.sh).

    python benches/bench_hf_counters.py [path.gguf]
"""

from __future__ import annotations

import sys
import time

from bpecore.encoding import _RecountingCounter
from bpecore.gguf import load_gguf
from bpecore.hf import _PrependCounter


def _seconds(enc, make, fill: str, n: int) -> float:
    counter = make()
    start = time.process_time()
    for char in fill * n:
        counter.push(char)
    seconds = time.process_time() - start
    assert counter.count == enc.count(fill * n)
    return seconds


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "build/gguf-vocabs/ggml-vocab-qwen2.gguf"
    enc = load_gguf(path)
    now = {"appending": enc.appendable_counter, "prepending": enc.prependable_counter}
    before = {
        "appending": lambda: _RecountingCounter(enc),
        "prepending": lambda: _PrependCounter(enc),
    }
    for fill in ("a", " "):
        for name, make in now.items():
            quarter, whole = (_seconds(enc, make, fill, n) for n in (250_000, 1_000_000))
            print(f"now    {name:10} {fill!r} 250 K {quarter:.2f} s, 1 MB {whole:.2f} s")
        for name, make in before.items():
            a, b = (_seconds(enc, make, fill, n) for n in (10_000, 20_000))
            print(
                f"before {name:10} {fill!r} 10 K {a:.2f} s, 20 K {b:.2f} s, 1 MB ~{b * 2500:.0f} s"
            )


if __name__ == "__main__":
    main()
