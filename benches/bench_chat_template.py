"""Open models' chat requests: bpecore's count against transformers' apply_chat_template.

Usage: python benches/bench_chat_template.py [--runs 20]
Writes a model directory (a byte-level BPE tokenizer.json trained on the English corpus, 700 ids,
and the tests' Qwen-style chat template), then counts a conversation of 10, 100 and 1,000 turns
(a system message, then user and assistant turns of ~15 words) with add_generation_prompt both
ways: bpecore.count_messages(messages, model=enc) and len(tokenizer.apply_chat_template(...,
tokenize=True)). Both must agree; the times are the best of --runs calls. Needs tokenizers (the
test extra) and transformers, e.g. as scripts/chat_reference.sh installs it:
PYTHONPATH=build/chat-reference:. python benches/bench_chat_template.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-place build, if not installed
from bpecore.chat import count_messages  # noqa: E402
from bpecore.pretrained import from_pretrained  # noqa: E402
from tests.conftest import QWEN_STYLE_TEMPLATE, read_corpus  # noqa: E402


def model_dir(root: Path) -> Path:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([read_corpus("english")[:40_000]], trainer)
    tok.add_special_tokens(
        [AddedToken(t, normalized=False) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")]
    )
    tok.add_tokens([AddedToken("<tool_call>", normalized=False, special=False)])
    (root / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": QWEN_STYLE_TEMPLATE,
        "eos_token": "<|im_end|>",
        "model_max_length": 10**6,
    }
    (root / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return root


def conversation(turns: int) -> list[dict]:
    messages = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"Question {i}: what is the weather in Paris today?"},
            {"role": "assistant", "content": f"Answer {i}: sunny and 18 degrees, light wind."},
        ]
    return messages


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        directory = model_dir(Path(tmp))
        enc = from_pretrained(directory)
        tok = transformers.AutoTokenizer.from_pretrained(str(directory))
    print("| conversation | tokens | bpecore count_messages | transformers apply_chat_template |")
    print("|---|---:|---:|---:|")
    for turns in (10, 100, 1000):
        messages = conversation(turns)

        def ours(m=messages):
            return count_messages(m, model=enc)

        def theirs(m=messages):
            return len(
                tok.apply_chat_template(
                    m, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            )

        n = ours()
        assert n == theirs(), (turns, n, theirs())
        t_ours, t_theirs = best(ours, args.runs), best(theirs, args.runs)
        print(
            f"| {turns:,} turns | {n:,} | {t_ours * 1e3:.2f} ms | {t_theirs * 1e3:.2f} ms "
            f"({t_theirs / t_ours:.1f}x) |"
        )


if __name__ == "__main__":
    main()
