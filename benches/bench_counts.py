"""Training past one machine: count throughput, piece-table size and the merge step from counts.

Inputs, as ``bench_train.py`` builds them: its training text (english + code + multilingual from
../shared/corpora, the last ~100 KB of each held out, 2.84 MB) repeated ``--repeat`` times (32:
the 91 MB training mix) and ``--big-repeat`` times (352: a 1.0 GB corpus); and "wide": english,
code, multilingual, adv_unicode and adv_base64 (5.2 MB of distinct text, 4-5x the distinct pieces
of the mix), for the merge step's cost per distinct piece. Plain files in a temporary directory.

1. ``count``: ``count_pieces`` throughput on the 91 MB mix (input MB per wall second and per CPU
   second of all the processes that work) with 1 and 2 worker processes on this machine
   (``workers=``), and on a dask.distributed LocalCluster of 1 and 2 worker processes over
   ``file_shards`` of ``--shard-mb`` (count on the workers, sum on a worker, result here).
   ``cpu``: MB per CPU second in one process on distinct text, and with SuperBPE's stage 2.
2. ``table``: the piece table of each input: distinct pieces, the ``.bpecounts`` file size, the
   Parquet file size and the in-memory size of the dict (``sys.getsizeof`` of the dict, its keys
   and values), per GB of input; plus distinct pieces over growing prefixes of distinct text
   (the corpora's paragraphs dealt round-robin), which a repeated corpus cannot show.
3. ``merge``: ``train(counts=file)`` at each ``--sizes`` from the saved counts of each input, in a
   fresh subprocess per run: wall time of the call (loading the file included) and its merge
   step, and the process's peak RSS (VmHWM, imports included); Hugging Face ``tokenizers``
   training the same vocab on the 91 MB file (``bench_train.py --child hf``: time of the
   training call, its peak RSS). min_frequency 2, o200k split, medians of ``--runs``.

    python benches/bench_counts.py [--parts count table merge] [--sizes 32000 128000] [--runs 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import _largest_peak, _machine, _prepare  # noqa: E402

CORPORA = ROOT.parent / "shared" / "corpora"
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


# ----------------------------------------------------------------------------- inputs
def _inputs(workdir: Path, repeat: int, big_repeat: int) -> dict[str, str]:
    base, _ = _prepare(workdir, 1)
    text = Path(base).read_bytes()
    out = {}
    for label, n in (("mix", repeat), ("big", big_repeat)):
        path = workdir / f"{label}.txt"
        with open(path, "wb") as f:
            for _ in range(n):
                f.write(text)
        out[label] = str(path)
    out["distinct"] = base
    wide = workdir / "wide.txt"  # distinct text with many distinct pieces: a second table size
    wide.write_bytes(
        b"".join(
            gzip.decompress((CORPORA / f"{n}.1mb.txt.gz").read_bytes())
            for n in ("english", "code", "multilingual", "adv_unicode", "adv_base64")
        )
    )
    out["wide"] = str(wide)
    return out


def _mb(path: str) -> float:
    return os.path.getsize(path) / 1e6


# ----------------------------------------------------------------------------- 1. count
def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its waited-for children."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bench_count(files: dict[str, str], shard_mb: int, runs: int) -> list[dict]:
    from bpecore import count_pieces
    from bpecore.training import file_shards

    rows = []
    path = files["mix"]
    size = os.path.getsize(path)
    for workers in (1, 2):
        times, cpus = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), _cpu_seconds()
            counts = count_pieces(path, workers=workers)
            times.append(time.perf_counter() - t)
            cpus.append(_cpu_seconds() - c)
        rows.append(
            {
                "engine": "processes",
                "workers": workers,
                "seconds": statistics.median(times),
                "cpu_seconds": statistics.median(cpus),
                "load": os.getloadavg()[0],
            }
        )
        print(json.dumps(rows[-1]))
    try:
        import distributed
    except ImportError:
        print("(dask.distributed not installed: no Dask rows)")
        return rows
    shards = file_shards(path, shard_mb * 1_000_000)
    for workers in (1, 2):
        with (
            distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.submit(sum, [1]).result()  # workers up and importing before the clock starts
            times, cpus = [], []
            for _ in range(runs):
                before = sum(client.run(_cpu_seconds).values())
                t = time.perf_counter()
                futures = client.map(count_pieces, shards, pure=False)
                total = client.submit(sum, futures).result()
                times.append(time.perf_counter() - t)
                cpus.append(sum(client.run(_cpu_seconds).values()) - before)
                del futures
            assert total == counts, "Dask counts differ from count_pieces(path)"
        rows.append(
            {
                "engine": f"dask ({len(shards)} shards of {shard_mb} MB)",
                "workers": workers,
                "seconds": statistics.median(times),
                "cpu_seconds": statistics.median(cpus),
                "load": os.getloadavg()[0],
            }
        )
        print(json.dumps(rows[-1]))
    for r in rows:
        r["mb_s"] = size / 1e6 / r["seconds"]
        r["mb_per_cpu_s"] = size / 1e6 / r["cpu_seconds"]
        print(
            f"{r['engine']}, {r['workers']} worker(s): {r['mb_s']:.1f} MB/s wall, "
            f"{r['mb_per_cpu_s']:.1f} MB per CPU second, load {r['load']:.1f}"
        )
    return rows


def bench_cpu(files: dict[str, str], runs: int) -> list[dict]:
    """In-process counting, MB per CPU second, on distinct text (no repeats) and with SuperBPE."""
    from bpecore import count_pieces

    rows = []
    for label, superbpe in (("distinct", False), ("wide", False), ("distinct", True)):
        path = files[label]
        cpus = []
        for _ in range(runs):
            c = _cpu_seconds()
            count_pieces(path, workers=1, superbpe=superbpe)
            cpus.append(_cpu_seconds() - c)
        row = {
            "input": label,
            "superbpe": superbpe,
            "mb_per_cpu_s": _mb(path) / statistics.median(cpus),
        }
        rows.append(row)
        print(json.dumps(row))
    return rows


# ----------------------------------------------------------------------------- 2. table
def _dict_bytes(d: dict) -> int:
    return sys.getsizeof(d) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in d.items())


def bench_table(files: dict[str, str], workdir: Path) -> tuple[list[dict], list[dict]]:
    from bpecore import count_pieces

    rows = []
    for label in ("distinct", "wide", "mix", "big"):
        path = files[label]
        counts = count_pieces(path, workers=2)
        binary = counts.save(workdir / f"{label}.bpecounts")
        row = {
            "input": label,
            "mb": _mb(path),
            "pieces": len(counts),
            "binary": os.path.getsize(binary),
            "dict": _dict_bytes(counts.pieces),
        }
        try:
            row["parquet"] = os.path.getsize(counts.save(workdir / f"{label}.parquet"))
        except ImportError:
            row["parquet"] = None
        rows.append(row)
        gb = row["mb"] / 1000
        print(
            f"{label}: {row['mb']:.1f} MB, {row['pieces']:,} pieces, .bpecounts "
            f"{row['binary'] / 1e6:.2f} MB ({row['binary'] / 1e6 / gb:.1f} MB/GB), dict "
            f"{row['dict'] / 1e6:.1f} MB"
        )
    # distinct pieces over growing prefixes of distinct text: the paragraphs of the corpora dealt
    # round-robin, so every prefix holds each corpus in proportion
    growth = []
    for label, names in (
        ("english + code + multilingual", ["english", "code", "multilingual"]),
        (
            "+ adv_unicode, adv_base64",
            ["english", "code", "multilingual", "adv_unicode", "adv_base64"],
        ),
    ):
        paras = [
            gzip.decompress((CORPORA / f"{n}.1mb.txt.gz").read_bytes())
            .decode("utf-8")
            .split("\n\n")
            for n in names
        ]
        dealt = [p[i] for i in range(max(map(len, paras))) for p in paras if i < len(p)]
        joined = "\n\n".join(dealt)
        for frac in (0.0625, 0.125, 0.25, 0.5, 1.0):
            part = joined[: int(len(joined) * frac)]
            c = count_pieces([part])
            nbytes = len(part.encode("utf-8"))
            growth.append({"text": label, "mb": nbytes / 1e6, "pieces": len(c)})
            print(f"growth {label} {nbytes / 1e6:.2f} MB: {len(c):,} pieces")
    return rows, growth


# ----------------------------------------------------------------------------- 3. merge
def _merge_child(counts_path: str, vocab_size: int) -> None:
    t0 = time.perf_counter()
    from bpecore import train

    imported = _largest_peak()
    t1 = time.perf_counter()
    enc = train(counts=counts_path, vocab_size=vocab_size, min_frequency=2)
    seconds = time.perf_counter() - t1
    print(
        json.dumps(
            {
                "seconds": seconds,
                "load_seconds": enc.training.pretokenize_seconds,
                "merge_seconds": enc.training.merge_seconds,
                "merges": len(enc.training.merges),
                "peak_rss": _largest_peak(),
                "import_rss": imported,
                "import_seconds": t1 - t0,
            }
        )
    )


def _run(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, env=ENV, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench_merge(files: dict[str, str], workdir: Path, sizes: list[int], runs: int) -> list[dict]:
    rows = []
    for vocab_size in sizes:
        for label in ("mix", "big", "wide"):
            counts_path = workdir / f"{label}.bpecounts"
            if not counts_path.exists():
                from bpecore import count_pieces

                count_pieces(files[label], workers=2).save(counts_path)
            cmd = [sys.executable, __file__, "--merge-child", str(counts_path), str(vocab_size)]
            rs = [_run(cmd) for _ in range(runs)]
            row = {
                "vocab": vocab_size,
                "trainer": f"bpecore train(counts) [{label}]",
                **{k: statistics.median(r[k] for r in rs) for k in rs[0]},
            }
            rows.append(row)
            print(json.dumps(row))
        out = tempfile.mkdtemp(prefix="bench_counts_hf_")
        cmd = [
            sys.executable,
            str(Path(__file__).resolve().parent / "bench_train.py"),
            "--child",
            "hf",
            "--vocab",
            str(vocab_size),
            "--train",
            files["mix"],
            "--out",
            out,
            "--superbpe",
            "auto",
        ]
        try:
            rs = [_run(cmd) for _ in range(runs)]
        except subprocess.CalledProcessError as e:
            print(f"(HF tokenizers run failed: {e.stderr[-300:]})")
            continue
        row = {
            "vocab": vocab_size,
            "trainer": "HF tokenizers (files) [mix]",
            **{k: statistics.median(r[k] for r in rs) for k in rs[0]},
        }
        rows.append(row)
        print(json.dumps(row))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", default=["count", "cpu", "table", "merge"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32000, 128000])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=32)
    ap.add_argument("--big-repeat", type=int, default=352)
    ap.add_argument("--shard-mb", type=int, default=8)
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--merge-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.merge_child:
        _merge_child(args.merge_child[0], int(args.merge_child[1]))
        return
    workdir = Path(tempfile.mkdtemp(prefix="bench_counts_"))
    files = _inputs(workdir, args.repeat, args.big_repeat)
    print(f"machine: {_machine()}")
    print(", ".join(f"{k} {_mb(v):.1f} MB" for k, v in files.items()))
    results: dict = {"files": {k: _mb(v) for k, v in files.items()}}
    if "count" in args.parts:
        results["count"] = bench_count(files, args.shard_mb, args.runs)
    if "cpu" in args.parts:
        results["cpu"] = bench_cpu(files, args.runs)
    if "table" in args.parts:
        results["table"], results["growth"] = bench_table(files, workdir)
    if "merge" in args.parts:
        results["merge"] = bench_merge(files, workdir, args.sizes, args.runs)
    results["load_average_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    for f in workdir.iterdir():
        f.unlink()
    workdir.rmdir()


if __name__ == "__main__":
    main()
