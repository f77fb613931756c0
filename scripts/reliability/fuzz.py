"""Fuzz runner for the core: N generated inputs per target within a time budget, each target in its own
process (a segfault is then a reported crash, not a dead runner).

Targets (tests/reliability/fuzz_targets.py): ``pretokenize`` (scanners vs ``regex.findall``),
``encode`` (vs bpecore.reference), ``exact`` (split_at, split_at_end, count_till_limit, interval
counts, appending and prepending vs ``enc.count`` of the slice), ``decode`` (arbitrary ids: the
token table or ValueError), ``load_tiktoken`` and ``load_hf`` (malformed, truncated, duplicated-rank,
non-UTF-8, gzip, deeply nested files: VocabError/ValueError only, and a file that loads encodes like
the reference over its own ranks).

    python scripts/reliability/fuzz.py                                   # every target, 60 s each, 2 processes
    python scripts/reliability/fuzz.py --seconds 600 --inputs 1000000 --jobs 2
    python scripts/reliability/fuzz.py --target encode --seconds 30 --seed 7
    python scripts/reliability/fuzz.py --atheris load_hf -- -atheris_runs=100000   # coverage-guided (Python code)

Per target it prints inputs tried, inputs/s, wrong answers (AssertionError), crashes (any other
exception, or the worker dying), and the first few failing inputs with the seed that replays them
(input i of a worker is drawn from ``random.Random(f"{seed}:{i}")``). Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "reliability")]


def worker(target: str, seconds: float, max_inputs: int, seed: int) -> dict:
    import fuzz_targets as ft

    gen, check = ft.TARGETS[target]
    ft.warm_up(target)
    failures: list[dict] = []
    wrong = crashes = n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while n < max_inputs and (n & 63 or time.perf_counter() < deadline):
        rng = random.Random(f"{seed}:{n}")
        args = gen(rng)
        try:
            check(*args) if isinstance(args, tuple) else check(args)
        except AssertionError as e:
            wrong += 1
            if len(failures) < 5:
                failures.append(
                    {"input": n, "kind": "wrong", "args": repr(args)[:500], "error": str(e)[:500]}
                )
        except Exception as e:  # noqa: BLE001 - every other exception is a crash to report
            crashes += 1
            if len(failures) < 5:
                failures.append(
                    {
                        "input": n,
                        "kind": "crash",
                        "args": repr(args)[:500],
                        "error": f"{type(e).__name__}: {e}"[:300],
                        "traceback": traceback.format_exc()[-1500:],
                    }
                )
        n += 1
    return {
        "target": target,
        "inputs": n,
        "seconds": time.perf_counter() - t0,
        "wrong": wrong,
        "crashes": crashes,
        "failures": failures,
        "seed": seed,
    }


def run_target(target: str, seconds: float, max_inputs: int, seed: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        target,
        "--seconds",
        str(seconds),
        "--inputs",
        str(max_inputs),
        "--seed",
        str(seed),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 600)
    if proc.returncode != 0:
        return {
            "target": target,
            "inputs": None,
            "seconds": seconds,
            "wrong": 0,
            "crashes": 1,
            "seed": seed,
            "failures": [
                {
                    "kind": "crash",
                    "error": f"worker exited {proc.returncode}",
                    "stderr": proc.stderr[-2000:],
                }
            ],
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_atheris(target: str, argv: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(
        include=["bpecore", "fuzz_targets"]
    ):  # the Python side: loaders, facade
        import fuzz_targets as ft
    gen, check = ft.TARGETS[target]

    names = list(ft.PATTERNS)

    def structured(data: bytes):
        fdp = atheris.FuzzedDataProvider(data)
        if target == "pretokenize":
            return names[fdp.ConsumeIntInRange(0, len(names) - 1)], fdp.ConsumeUnicodeNoSurrogates(
                256
            )
        if target == "encode":
            return ft.ENCODINGS[fdp.ConsumeIntInRange(0, 1)], fdp.ConsumeUnicodeNoSurrogates(32)
        if target == "exact":
            return (
                ft.ENCODINGS[fdp.ConsumeIntInRange(0, 1)],
                fdp.ConsumeUnicodeNoSurrogates(24),
                fdp.ConsumeInt(4),
            )
        if target == "decode":
            return ft.ENCODINGS[fdp.ConsumeIntInRange(0, 1)], fdp.ConsumeIntList(
                fdp.ConsumeIntInRange(0, 12), 9
            )
        # loaders: half the time the fuzzer's bytes as the file, half a generated malformed file
        return data[1:] if data[:1] < b"\x80" else gen(random.Random(data))

    def one(data: bytes) -> None:
        args = structured(data)
        check(*args) if isinstance(args, tuple) else check(args)

    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def main() -> int:
    import fuzz_targets as ft

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", action="append", choices=list(ft.TARGETS), help="default: all")
    p.add_argument(
        "--seconds", type=float, default=60.0, help="time budget per target (default 60)"
    )
    p.add_argument(
        "--inputs", type=int, default=1_000_000, help="stop a target after this many inputs"
    )
    p.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="targets run at once"
    )
    p.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument(
        "--atheris", choices=list(ft.TARGETS), help="run one target under atheris instead"
    )
    args, rest = p.parse_known_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.seconds, args.inputs, args.seed)))
        return 0
    targets = args.target or list(ft.TARGETS)
    print(
        f"fuzz: {len(targets)} targets, {args.seconds:g} s / {args.inputs} inputs each, {args.jobs} jobs, "
        f"seed {args.seed}",
        flush=True,
    )
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(
            pool.map(lambda t: run_target(t, args.seconds, args.inputs, args.seed), targets)
        )
    print(
        f"\n{'target':<14} {'inputs':>10} {'seconds':>8} {'inputs/s':>9} {'wrong':>6} {'crashes':>8}"
    )
    for r in results:
        n = r["inputs"]
        rate = f"{n / r['seconds']:.0f}" if n else "-"
        print(
            f"{r['target']:<14} {n if n is not None else '-':>10} {r['seconds']:>8.1f} {rate:>9} {r['wrong']:>6} "
            f"{r['crashes']:>8}"
        )
    for r in results:
        for f in r["failures"]:
            print(
                f"\n{r['target']} seed {r['seed']} input {f.get('input')}: {f['kind']}: {f['error']}"
            )
            print("  args:", f.get("args"))
            if f.get("traceback") or f.get("stderr"):
                print(f.get("traceback") or f.get("stderr"))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if any(r["wrong"] or r["crashes"] for r in results) else 0


if __name__ == "__main__":
    if "--atheris" in sys.argv:  # before anything imports bpecore, so atheris can instrument it
        i = sys.argv.index("--atheris")
        run_atheris(sys.argv[i + 1], [a for a in sys.argv[i + 2 :] if a != "--"])
        sys.exit(0)
    sys.exit(main())
