"""Randomised differential run of every exact operation against brute-force counts.

    python scripts/reliability/stress_exact.py SEED SECONDS

Texts are runs of characters that decide the three shipped patterns (cases, marks, apostrophes,
every kind of whitespace, digits of other scripts, CJK, emoji); pushes split bytes anywhere.
Prints the number of cases and of wrong answers (each printed).
"""

import random
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
import bpecore
from bpecore.registry import R50K_PATTERN
from tests.conftest import shared_ranks

encs = [
    bpecore.get_encoding("cl100k_base"),
    bpecore.get_encoding("o200k_base"),
    bpecore.Encoding("r50k_on_cl100k", shared_ranks("cl100k_base"), R50K_PATTERN, {}),
]
alpha = list("aAbBzZ  \t\n\r'’sStTlLdDmMvVrReE0123456789.,-/!?()[]{}=_*#\"") + [
    "\u00a0",
    "\u0301",
    "\u02b0",
    "\u01c5",
    "é",
    "É",
    "ß",
    "中",
    "文",
    "。",
    "😀",
    "\u3000",
    "\u2028",
    "\u0085",
    "ǅ",
    "ʰ",
    "١",
    "Ⅻ",
    "ſ",
    "\u200b",
    "\x1c",
]
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
t0 = time.time()
n = 0
bad = 0
while time.time() - t0 < float(sys.argv[2]) if len(sys.argv) > 2 else 60:
    enc = rng.choice(encs)
    k = rng.randrange(1, 40)
    runs = []
    for _ in range(rng.randrange(1, 8)):
        c = (
            rng.choice(alpha)
            if rng.random() < 0.7
            else "".join(rng.choice(alpha) for _ in range(3))
        )
        runs.append(c * rng.randrange(1, 12))
    text = "".join(runs)[:200]
    raw = text.encode()
    ac = enc.appendable_counter()
    pos = 0
    while pos < len(raw):
        step = rng.choice([1, 1, 1, 2, 3, 7])
        got = ac.push(raw[pos : pos + step])
        pos += step
        if got != enc.count(ac.text):
            bad += 1
            print("APPEND", enc.name, repr(ac.text))
            break
    nn = rng.randrange(0, 30)
    kk = enc.split_at(text, nn)
    if enc.count(text[:kk]) > nn or any(
        enc.count(text[:j]) <= nn for j in range(kk + 1, len(text) + 1)
    ):
        bad += 1
        print("SPLIT", enc.name, repr(text), nn, kk)
    kk = enc.split_at_end(text, nn)
    if enc.count(text[kk:]) > nn or any(enc.count(text[j:]) <= nn for j in range(0, kk)):
        bad += 1
        print("SPLITEND", enc.name, repr(text), nn, kk)
    ic = enc.interval_counter(text)
    for _ in range(5):
        i = rng.randrange(len(text) + 1)
        j = rng.randrange(i, len(text) + 1)
        if ic.count(i, j) != enc.count(text[i:j]):
            bad += 1
            print("INTERVAL", enc.name, repr(text), i, j)
            break
    pc = enc.prependable_counter()
    end = len(text)
    while end > 0:
        st = max(0, end - rng.randrange(1, 5))
        if pc.push(text[st:end]) != enc.count(text[st:]):
            bad += 1
            print("PREPEND", enc.name, repr(text[st:]))
            break
        end = st
    n += 1
    if bad > 5:
        break
print("cases", n, "bad", bad)
