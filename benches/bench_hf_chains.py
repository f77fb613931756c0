"""Chained pre-tokenizers (DeepSeek-Coder v1, Falcon, StarCoder2): count and the exact cuts.

    python benches/bench_hf_chains.py [--size 100000] [--reps 3] [--vocab 8000]

No such file is shipped or installed, so each is trained here with Hugging Face `tokenizers` on
the shared corpora (``--vocab`` tokens), with the model's pre-tokenizer as its file spells it:
- deepseek-coder: five Isolated Splits (line breaks, ``\\s?\\p{L}+``, ``\\s?\\p{P}+``, its CJK
  range, ``\\p{N}``), then ByteLevel without regex: bpecore runs one derived regex;
- falcon: punctuation runs, GPT-2's regex without its last ``\\s+``, digit triples, then
  ByteLevel: bpecore runs the stages in Python;
- starcoder: Digits one by one, then ByteLevel with GPT-2's regex: one derived regex.

Count: single thread, first-seen ``--size``-character slices of english, code and multilingual
(slice 0 warms up, slices 1..reps are timed), median MB/s of UTF-8 in process CPU time for
bpecore's ``count`` and `tokenizers`' ``encode``; each slice's count is checked against
`tokenizers`. Cuts: ``split_at`` and ``split_at_end`` at n = 100 and 1000 on the first 50 KB of
the code corpus (median of ``reps`` calls, ms), each answer checked against the definition on
the 200 cut positions around it.
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bpecore  # noqa: E402

CORPORA = ["english", "code", "multilingual"]
GPT2_WITHOUT_LAST = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"


def _corpus(name: str) -> str:
    with gzip.open(ROOT.parent / "shared" / "corpora" / f"{name}.1mb.txt.gz", "rt") as f:
        return f.read()


def _pre_tokenizers():
    from tokenizers import Regex, pre_tokenizers

    def split(pattern: str):
        return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)

    plain_bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return {
        "deepseek-coder": pre_tokenizers.Sequence(
            [
                split("[\r\n]"),
                split(r"\s?\p{L}+"),
                split(r"\s?\p{P}+"),
                split("[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"),
                split(r"\p{N}"),
                plain_bytes,
            ]
        ),
        "falcon": pre_tokenizers.Sequence(
            [
                split(r"[\p{P}\$\+<=>\^~\|`]+"),
                split(GPT2_WITHOUT_LAST),
                split("[0-9][0-9][0-9]"),
                plain_bytes,
            ]
        ),
        "starcoder": pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        ),
    }


def _train(pre, vocab: int, path: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([_corpus(name)[:200_000] for name in CORPORA], trainer)
    path.write_text(tok.to_str())
    return Tokenizer.from_file(str(path))


def _median_seconds(call, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=8000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp())
    print("| chain | corpus | bpecore count MB/s | tokenizers encode MB/s | ratio |")
    print("|---|---|---|---|---|")
    cuts = []
    for kind, pre in _pre_tokenizers().items():
        path = directory / f"{kind}.json"
        hf = _train(pre, args.vocab, path)
        enc = bpecore.load_hf(str(path))
        for name in CORPORA:
            text = _corpus(name)
            slices = [text[i * args.size : (i + 1) * args.size] for i in range(args.reps + 1)]
            enc.count(slices[0])
            hf.encode(slices[0], add_special_tokens=False)
            ours, theirs = [], []
            for piece in slices[1:]:
                size = len(piece.encode("utf-8")) / 1e6
                ours.append(size / _median_seconds(lambda p=piece: enc.count(p), 1))
                theirs.append(
                    size
                    / _median_seconds(lambda p=piece: hf.encode(p, add_special_tokens=False), 1)
                )
                if enc.count(piece) != len(hf.encode(piece, add_special_tokens=False).ids):
                    raise SystemExit(f"{kind} {name}: count differs from tokenizers")
            a, b = statistics.median(ours), statistics.median(theirs)
            print(f"| {kind} | {name} | {a:.1f} | {b:.1f} | {a / b:.1f}x |", flush=True)
        text = _corpus("code")[:50_000]
        for n in (100, 1000):
            k = enc.split_at(text, n)
            j = enc.split_at_end(text, n)
            assert (
                enc.count(text[:k])
                <= n
                < min(
                    (enc.count(text[:i]) for i in range(k + 1, min(len(text), k + 200) + 1)),
                    default=n + 1,
                )
            )
            assert (
                enc.count(text[j:])
                <= n
                < min((enc.count(text[i:]) for i in range(max(0, j - 200), j)), default=n + 1)
            )
            cuts.append(
                (
                    kind,
                    n,
                    1000 * _median_seconds(lambda n=n: enc.split_at(text, n), args.reps),
                    1000 * _median_seconds(lambda n=n: enc.split_at_end(text, n), args.reps),
                )
            )
    print("\n| chain | n | split_at ms | split_at_end ms |")
    print("|---|---|---|---|")
    for kind, n, head, tail in cuts:
        print(f"| {kind} | {n} | {head:.1f} | {tail:.1f} |")


if __name__ == "__main__":
    main()
