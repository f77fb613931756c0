"""Load time of the shipped encodings: a fresh interpreter per run, median of N runs.

    python benches/bench_load.py [--runs 5]

Reports, per encoding set, the wall time of ``import bpecore`` and of ``get_encoding`` for each
name (gunzip + SHA-256 + parse + table build) and the CPU time of that load (steadier than wall
time on a shared machine); then the start-up of a service-like process that imports a web stack
with the load done first or in a thread (fastapi/uvicorn/pydantic must be installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import bpecore
t1 = time.perf_counter()
c0 = time.process_time()
for name in sys.argv[1:]:
    bpecore.get_encoding(name)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "cpu": time.process_time() - c0}))
"""

# Loading in a thread while the main thread imports a web stack (what the service does at start-up):
# the table build releases the GIL, so the two overlap on a second core.
OVERLAP = r"""
import json, sys, threading, time
t0 = time.perf_counter()
import bpecore
names = sys.argv[2:]
def load():
    for name in names:
        bpecore.get_encoding(name)
if sys.argv[1] == "thread":
    th = threading.Thread(target=load)
    th.start()
    import fastapi, uvicorn, pydantic  # noqa: F401
    th.join()
else:
    load()
    import fastapi, uvicorn, pydantic  # noqa: F401
print(json.dumps({"total": time.perf_counter() - t0}))
"""

SETS = [["cl100k_base"], ["o200k_base"], ["cl100k_base", "o200k_base", "o200k_harmony"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"load average: {os.getloadavg()[0]:.2f}; median of {args.runs} fresh processes")
    print(f"{'encodings':45} {'import ms':>10} {'load ms':>9} {'load CPU ms':>12}")
    for names in SETS:
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", CHILD, *names],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(args.runs)
        ]
        med = {k: statistics.median(r[k] for r in runs) * 1e3 for k in runs[0]}
        print(f"{' + '.join(names):45} {med['import']:10.0f} {med['load']:9.0f} {med['cpu']:12.0f}")
    names = SETS[-1]
    for mode in ("sequential", "thread"):
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", OVERLAP, mode, *names],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )["total"]
            for _ in range(args.runs)
        ]
        print(
            f"import bpecore + load all + import fastapi/uvicorn/pydantic, {mode:10}: "
            f"{statistics.median(runs) * 1e3:.0f} ms"
        )


if __name__ == "__main__":
    main()
