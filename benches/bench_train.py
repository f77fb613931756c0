"""Training benchmark: bpecore.train vs Hugging Face `tokenizers` BpeTrainer, side by side.

Corpus: english + code + multilingual from ../shared/corpora (1 MB each); the last ~100 KB of
each is held out, the rest (optionally repeated ``--repeat`` times) is the training file. Both
trainers get the same file, the o200k split regex, byte-level alphabet, min_frequency 2 and the
same vocab size. Each run is its own subprocess, so peak memory is measured per trainer:
"peak RSS" is the largest peak of that process (its VmHWM) and its worker processes (their
ru_maxrss), "tree PSS" the peak of the summed proportional set size of it and its workers (sampled
from /proc every 20 ms; PSS splits the pages forked workers share with the parent, which summed
RSS would count twice). The ru_maxrss that os.wait4 gives for the subprocess is not used: Linux
keeps it across execve, so it is at least this bench's own RSS at fork time (which grows once
held-out text has been encoded here). Time is the training call only. Medians over ``--runs`` runs.

    python benches/bench_train.py [--sizes 8000 32000] [--runs 3] [--repeat 1] [--superbpe auto|0.8]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPORA = ROOT.parent / "shared" / "corpora"
NAMES = ["english", "code", "multilingual"]
HELD_OUT = 100_000


# ----------------------------------------------------------------------------- child side
def _child(kind: str, vocab_size: int, train_file: str, out: str, superbpe: str) -> None:
    if kind == "hf":
        from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
        from tokenizers.models import BPE
        from tokenizers.trainers import BpeTrainer

        from bpecore.registry import O200K_PATTERN

        tok = Tokenizer(BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(O200K_PATTERN), "isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        trainer = BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        start = time.perf_counter()
        tok.train([train_file], trainer)
        seconds = time.perf_counter() - start
        tok.save(os.path.join(out, "tokenizer.json"))
        merges = tok.get_vocab_size() - 256
    else:
        from bpecore import export
        from bpecore.training import train

        transition = (
            None
            if kind == "bpecore"
            else "auto"
            if superbpe == "auto"
            else int(vocab_size * float(superbpe)) - 256
        )
        start = time.perf_counter()
        enc = train(
            [train_file],
            vocab_size=vocab_size,
            pattern="o200k",
            min_frequency=2,
            superbpe_transition=transition,
        )
        seconds = time.perf_counter() - start
        export.save_tiktoken(enc, os.path.join(out, "vocab.tiktoken"))
        merges = len(enc.training.merges)
    print(json.dumps({"seconds": seconds, "merges": merges, "peak_rss": _largest_peak()}))


def _largest_peak() -> int:
    """Peak RSS (bytes) of the largest of this process and its waited-for children (workers).

    This process's own peak is ``VmHWM``: ``ru_maxrss`` would not do, because Linux carries it
    across ``execve``, so it would report the bench parent's RSS at fork time whenever that is
    larger. Forked workers' ``ru_maxrss`` (``RUSAGE_CHILDREN``) is theirs: they start with this
    process's pages.
    """
    import resource

    own = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    own = int(line.split()[1]) * 1024
    except OSError:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


# ----------------------------------------------------------------------------- parent side
def _pss(pid: int) -> int:
    """Proportional set size (bytes) of ``pid``: shared pages split among their users."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_pss(root: int) -> int:
    """Summed PSS (bytes) of ``root`` and its descendants (forked workers share pages)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += _pss(pid)
        stack.extend(p for p, pp in parent.items() if pp == pid)
    return total


def _run_measured(kind: str, vocab_size: int, train_file: str, superbpe: str) -> dict:
    """Run one trainer in a subprocess; its peaks come from the child (see ``_largest_peak``)."""
    out = tempfile.mkdtemp(prefix=f"bench_{kind}_")
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--vocab",
        str(vocab_size),
        "--train",
        train_file,
        "--out",
        out,
        "--superbpe",
        str(superbpe),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: exec the trainer with stdout on the pipe
        os.close(r)
        os.dup2(w, 1)
        os.execve(sys.executable, cmd, env)
    os.close(w)
    peak_tree = 0
    status, usage = 0, None
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        peak_tree = max(peak_tree, _tree_pss(pid))
        time.sleep(0.02)
    with os.fdopen(r) as f:
        stdout = f.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{kind} failed: {stdout[-500:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["wait4_maxrss"] = (
        usage.ru_maxrss * 1024
    )  # at least this process's RSS at fork: see _largest_peak
    result["tree_pss"] = peak_tree
    result["out"] = out
    return result


def _held_out_tokens(kind: str, out: str, texts: dict[str, str]) -> dict[str, int]:
    if kind == "hf":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        return {k: len(tok.encode(t).ids) for k, t in texts.items()}
    from bpecore import registry

    enc = registry.load_saved(os.path.join(out, "vocab.tiktoken"))
    return {k: enc.count(t) for k, t in texts.items()}


def _prepare(workdir: Path, repeat: int) -> tuple[str, dict[str, str]]:
    train_parts, held = [], {}
    for name in NAMES:
        text = gzip.decompress((CORPORA / f"{name}.1mb.txt.gz").read_bytes()).decode("utf-8")
        cut = text.rfind("\n", 0, len(text) - HELD_OUT) + 1
        train_parts.append(text[:cut])
        held[name] = text[cut:]
    train_file = workdir / "train.txt"
    train_file.write_text("".join(train_parts) * repeat, encoding="utf-8")
    return str(train_file), {"all": "".join(held[n] for n in NAMES), "english": held["english"]}


def _machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = "?"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, commit {commit}, load average {load}"


def _describe(superbpe: str) -> str:
    if superbpe == "auto":
        from bpecore.training import SUPERBPE_DEFAULT_FRACTION

        return f"'auto' ({SUPERBPE_DEFAULT_FRACTION:.0%} of the BPE ids)"
    return f"{float(superbpe):.0%} of the vocab"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8000, 32000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1, help="repeat the training text N times")
    ap.add_argument(
        "--superbpe",
        default="auto",
        help="SuperBPE transition: 'auto' (train()'s default rule) or a fraction of the vocab size",
    )
    ap.add_argument(
        "--trainers",
        nargs="+",
        default=["hf", "bpecore", "superbpe"],
        choices=["hf", "bpecore", "superbpe"],
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--vocab", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--train", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.vocab, args.train, args.out, args.superbpe)
        return

    kinds = list(args.trainers)
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("(Hugging Face tokenizers not installed: bpecore only)")
        kinds = [k for k in kinds if k != "hf"]
    workdir = Path(tempfile.mkdtemp(prefix="bench_train_"))
    train_file, held = _prepare(workdir, args.repeat)
    size_mb = os.path.getsize(train_file) / 1e6
    held_bytes = {k: len(t.encode("utf-8")) for k, t in held.items()}
    print(f"machine: {_machine()}")
    print(
        f"training text {size_mb:.2f} MB, held out {held_bytes['all'] / 1e3:.0f} KB ({held_bytes['english'] / 1e3:.0f} KB English); "
        f"o200k split, min_frequency 2, SuperBPE transition {_describe(args.superbpe)}; median of {args.runs} runs"
    )
    header = f"{'vocab':>6} {'trainer':<9} {'time s':>7} {'merges/s':>9} {'peak RSS MB':>11} {'tree PSS MB':>11} {'B/token':>8} {'English tokens':>15}"
    print(header)
    print("-" * len(header))
    rows = []
    for vocab_size in args.sizes:
        english_base = None
        for kind in kinds:
            runs = [
                _run_measured(kind, vocab_size, train_file, args.superbpe) for _ in range(args.runs)
            ]
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = statistics.median(r["peak_rss"] for r in runs) / 1e6
            tree = statistics.median(r["tree_pss"] for r in runs) / 1e6
            tokens = _held_out_tokens(kind, runs[0]["out"], held)
            if kind == "bpecore":
                english_base = tokens["english"]
            note = ""
            if kind == "superbpe" and english_base:
                note = f" ({100 * (1 - tokens['english'] / english_base):.1f}% fewer)"
            row = (
                vocab_size,
                kind,
                seconds,
                runs[0]["merges"] / seconds,
                peak,
                tree,
                held_bytes["all"] / tokens["all"],
                tokens["english"],
            )
            rows.append(row)
            print(
                f"{row[0]:>6} {row[1]:<9} {row[2]:>7.2f} {row[3]:>9.0f} {row[4]:>11.0f} {row[5]:>11.0f} {row[6]:>8.3f} {row[7]:>15}{note}"
            )
    print("\npeak RSS: largest peak of the trainer process (VmHWM) and its workers (ru_maxrss);")
    print(
        "tree PSS: peak of the summed proportional set size of the trainer and its workers (sampled every 20 ms)."
    )


if __name__ == "__main__":
    main()
