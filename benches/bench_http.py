"""HTTP load test: the bpecore service against a minimal FastAPI + tiktoken server, side by side.

Both servers run the same way (uvicorn, uvloop + httptools, one worker, plain ``def`` endpoints in
the threadpool) and answer ``POST /v1/count {"text": ...}`` with the token count. The load comes
from ``wrk`` (C, on loopback; ``apt-get install wrk``) with a Lua script that posts one fixed body;
without wrk, a bounded asyncio/httpx client is used (and is then the bottleneck on small texts).
Reported per server: requests/s and p50/p99 latency for 1 KB and 100 KB English text at
concurrency 1, 16 and 64; RSS after load and after the run; start-up time (process start to the
first /readyz 200, median of ``--startup-runs`` fresh processes) with the RSS after load.
``--routes`` adds ``/v1/encode`` (the baseline encodes with tiktoken and returns the ids) and
``/v1/chunk`` (``max_tokens`` 100; bpecore only); ``--checkout DIR`` also serves bpecore from
another checkout (built in place), e.g. the main branch, for a before/after table.

    python benches/bench_http.py                  # 5 s per cell
    python benches/bench_http.py --duration 10 --client python
    python benches/bench_http.py --sizes 1KB --concurrency 64 --routes count encode chunk \
        --checkout ../main --startup-runs 0

The tiktoken baseline is built offline from the shared rank file (tiktoken cannot download here):
``tiktoken.Encoding("cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=..., special_tokens=...)``.
Note the machine: client and server share its cores, so absolute numbers are a lower bound.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout: python benches/bench_http.py

SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpora" / "english.1mb.txt.gz"
VOCAB = SHARED / "vocab" / "cl100k_base.tiktoken.gz"

TIKTOKEN_SERVER = r'''
"""Minimal FastAPI + tiktoken token counter: the baseline."""
import base64, gzip, sys
import tiktoken
from contextlib import asynccontextmanager
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from bpecore.registry import CL100K_PATTERN

STATE = {}

def load(path):
    ranks = {}
    for line in gzip.decompress(open(path, "rb").read()).splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding(
        "cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                        "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    )

@asynccontextmanager
async def lifespan(app):
    STATE["enc"] = load(sys.argv[2])
    yield

app = FastAPI(lifespan=lifespan)

class CountRequest(BaseModel):
    text: str

@app.post("/v1/count")
def count(body: CountRequest):
    return {"encoding": "cl100k_base", "count": len(STATE["enc"].encode_ordinary(body.text))}

class EncodeRequest(BaseModel):
    text: str

@app.post("/v1/encode")
def encode(body: EncodeRequest):
    tokens = STATE["enc"].encode(body.text)
    return {"encoding": "cl100k_base", "count": len(tokens), "tokens": tokens}

@app.get("/readyz")
def readyz():
    return {"status": "ok"} if "enc" in STATE else JSONResponse({"status": "loading"}, 503)

if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
                access_log=False, log_level="warning")
'''

WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BENCH_BODY"), "rb")
wrk.body = f:read("*all")
f:close()
done = function(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
                 + summary.errors.status + summary.errors.timeout
  io.write(string.format('BENCH {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "errors": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), errors))
end
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ready(port: int) -> bool:
    """One GET /readyz on a fresh connection: True for a 200 (a bare socket: polls cost ~0.1 ms)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            return s.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


class Server:
    def __init__(
        self,
        name: str,
        cmd: list[str],
        port: int,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.startup_s = self._wait_ready()
        self.rss_loaded = rss_mb(self.proc.pid)

    def _wait_ready(self) -> float:
        """Seconds from Popen to the first /readyz 200, polled every 5 ms."""
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited: {self.proc.stderr.read().decode()[-2000:]}"
                )
            if ready(self.port):
                return time.perf_counter() - self.t0
            time.sleep(0.005)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_wrk(
    url: str, body_path: Path, script: Path, concurrency: int, duration: float, route: str = "count"
) -> dict:
    threads = min(2, concurrency)
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{concurrency}",
            f"-d{max(1, round(duration))}s",
            "--timeout",
            "30s",
            "-s",
            str(script),
            url + "/v1/" + route,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_BODY": str(body_path)},
        check=True,
    ).stdout
    line = next(line for line in out.splitlines() if line.startswith("BENCH "))
    r = json.loads(line[6:])
    return {
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "p50_ms": r["p50_us"] / 1000,
        "p99_ms": r["p99_us"] / 1000,
        "errors": r["errors"],
    }


def run_python(
    url: str, body: bytes, concurrency: int, duration: float, route: str = "count"
) -> dict:
    async def main() -> dict:
        lat: list[float] = []
        errors = 0
        stop = time.perf_counter() + duration
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as c:

            async def worker() -> None:
                nonlocal errors
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    r = await c.post(
                        "/v1/" + route, content=body, headers={"content-type": "application/json"}
                    )
                    lat.append(time.perf_counter() - t)
                    errors += r.status_code != 200

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            elapsed = time.perf_counter() - t0
        lat.sort()
        return {
            "rps": len(lat) / elapsed,
            "p50_ms": lat[len(lat) // 2] * 1000,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "errors": errors,
        }

    return asyncio.run(main())


def texts() -> dict[str, str]:
    corpus = gzip.decompress(CORPUS.read_bytes()).decode()
    out = {}
    for label, size in (("1KB", 1024), ("100KB", 100 * 1024)):
        raw = corpus.encode()[:size]
        out[label] = raw.decode("utf-8", "ignore")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per cell")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--sizes", nargs="+", default=["1KB", "100KB"], choices=["1KB", "100KB"])
    ap.add_argument("--client", choices=["auto", "wrk", "python"], default="auto")
    ap.add_argument(
        "--startup-runs",
        type=int,
        default=5,
        help="fresh processes per kind for the start-up figure",
    )
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument(
        "--routes",
        nargs="+",
        default=["count"],
        choices=["count", "encode", "chunk"],
        help="routes to load (chunk: bpecore only)",
    )
    ap.add_argument(
        "--checkout", help="also serve bpecore from this checkout (before/after), as 'bpecore@DIR'"
    )
    args = ap.parse_args()
    client = args.client
    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "python"

    import tiktoken

    import bpecore

    work = Path(tempfile.mkdtemp(prefix="bench_http_"))
    (work / "tiktoken_server.py").write_text(TIKTOKEN_SERVER)
    script = work / "post.lua"
    script.write_text(WRK_SCRIPT)
    bodies = {}
    expected = {}
    enc = bpecore.get_encoding("cl100k_base")
    for label, text in texts().items():
        if label not in args.sizes:
            continue
        for route in args.routes:
            path = work / f"{route}-{label}.json"
            extra = {"max_tokens": 100} if route == "chunk" else {}
            path.write_text(json.dumps({"text": text, **extra}))
            bodies[route, label] = path
            expected[route, label] = enc.count(text)
    # the in-process library on the same texts (one thread, median of 51 calls): the ceiling the
    # service's MB/s is compared with
    inproc = {}
    for label, text in texts().items():
        if label in args.sizes:
            times = []
            for _ in range(51):
                t0 = time.perf_counter()
                enc.count(text)
                times.append(time.perf_counter() - t0)
            inproc[label] = len(text.encode()) / statistics.median(times) / 1e6

    # the image runs pip-installed modules, compiled to bytecode at install; do the same here, or
    # every start-up would also compile the sources (PYTHONDONTWRITEBYTECODE keeps them uncached)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "service", "bpecore"], cwd=ROOT, check=True
    )
    cmd_docker = json.loads(
        next(
            line
            for line in (ROOT / "Dockerfile").read_text().splitlines()
            if line.startswith("CMD ")
        )[4:]
    )
    results = []
    meta = []
    names = ["bpecore", "tiktoken"] + ([f"bpecore@{args.checkout}"] if args.checkout else [])
    for name in names:
        port = free_port()
        if name.startswith("bpecore"):
            cmd = list(cmd_docker)
            cmd[cmd.index("--port") + 1] = str(port)
            cmd[cmd.index("--host") + 1] = "127.0.0.1"
            if name == "bpecore":
                server = Server(name, cmd, port, {"BPESVC_LOG_LEVEL": "WARNING"})
            else:  # the other checkout: its bpecore and its service folder as bpecore_service
                other = Path(args.checkout).resolve()
                (work / "other").mkdir(exist_ok=True)
                link = work / "other" / "bpecore_service"
                if not link.exists():
                    link.symlink_to(other / "service")
                server = Server(
                    name,
                    cmd,
                    port,
                    {
                        "BPESVC_LOG_LEVEL": "WARNING",
                        "PYTHONPATH": f"{work / 'other'}{os.pathsep}{other}",
                    },
                    cwd=other,
                )
        else:
            server = Server(
                name,
                [sys.executable, str(work / "tiktoken_server.py"), str(port), str(VOCAB)],
                port,
            )
        try:
            for (route, label), path in bodies.items():
                if route == "chunk" and name == "tiktoken":
                    continue
                answer = httpx.post(
                    server.url + "/v1/" + route,
                    content=path.read_bytes(),
                    headers={"content-type": "application/json"},
                ).json()
                got = (
                    sum(c["tokens"] for c in answer["chunks"])
                    if route == "chunk"
                    else answer["count"]
                )
                if route != "chunk":  # chunk: the chunks' counts need not add up to the text's
                    assert got == expected[route, label], (name, route, label, got)
                for c in args.concurrency:
                    # warm-up, then measure
                    if client == "wrk":
                        run_wrk(server.url, path, script, c, 1, route)
                        r = run_wrk(server.url, path, script, c, args.duration, route)
                    else:
                        run_python(server.url, path.read_bytes(), c, 1, route)
                        r = run_python(server.url, path.read_bytes(), c, args.duration, route)
                    results.append(
                        {"server": name, "route": route, "size": label, "concurrency": c, **r}
                    )
                    print(
                        f"{name:9} /v1/{route:6} {label:6} c={c:<3} {r['rps']:9.0f} req/s  p50 {r['p50_ms']:8.2f} ms  "
                        f"p99 {r['p99_ms']:8.2f} ms  errors {r['errors']}",
                        file=sys.stderr,
                        flush=True,
                    )
            meta.append(
                {
                    "server": name,
                    "startup_s": server.startup_s,
                    "rss_loaded_mb": server.rss_loaded,
                    "rss_after_mb": rss_mb(server.proc.pid),
                }
            )
        finally:
            server.stop()

    # start-up (median of --startup-runs fresh processes, run alternately) and memory after load
    def bpecore_cmd(port: int) -> list[str]:
        cmd = list(cmd_docker)
        cmd[cmd.index("--port") + 1] = str(port)
        cmd[cmd.index("--host") + 1] = "127.0.0.1"
        return cmd

    kinds = {
        "bpecore, every shipped encoding": lambda port: Server(
            "bpecore", bpecore_cmd(port), port, {"BPESVC_LOG_LEVEL": "WARNING"}
        ),
        "bpecore, cl100k_base only": lambda port: Server(
            "bpecore",
            bpecore_cmd(port),
            port,
            {"BPESVC_LOG_LEVEL": "WARNING", "BPESVC_ENCODINGS": '["cl100k_base"]'},
        ),
        "tiktoken, cl100k_base": lambda port: Server(
            "tiktoken",
            [sys.executable, str(work / "tiktoken_server.py"), str(port), str(VOCAB)],
            port,
        ),
    }
    starts: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    for _ in range(args.startup_runs):
        for kind, make in kinds.items():
            server = make(free_port())
            starts[kind].append((server.startup_s, server.rss_loaded))
            server.stop()
    startup = []
    for kind, runs in starts.items():
        if not runs:  # --startup-runs 0
            continue
        seconds = sorted(t for t, _ in runs)
        rss = sorted(r for _, r in runs)
        startup.append(
            {
                "server": kind,
                "startup_s": statistics.median(seconds),
                "min_s": seconds[0],
                "max_s": seconds[-1],
                "rss_loaded_mb": statistics.median(rss),
            }
        )

    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        or "(not a git checkout)"
    )
    load = os.getloadavg()
    print(
        f"\n## HTTP {', '.join('/v1/' + r for r in args.routes)}, cl100k_base, English text "
        f"({client} client, {args.duration:g} s per cell)"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, tiktoken {tiktoken.__version__}, commit {commit}, "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n"
    )
    head = "| route | size | conc. |" + "".join(f" {n} req/s | p50 ms | p99 ms |" for n in names)
    print(head + " req/s vs tiktoken |")
    print("|---|---|---:|" + "---:|---:|---:|" * len(names) + "---:|")
    for route, label in bodies:
        for c in args.concurrency:
            row = f"| /v1/{route} | {label} | {c} |"
            cells = {}
            for n in names:
                r = next(
                    (
                        r
                        for r in results
                        if r["server"] == n
                        and r["route"] == route
                        and r["size"] == label
                        and r["concurrency"] == c
                    ),
                    None,
                )
                cells[n] = r
                row += (
                    f" {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |"
                    if r
                    else " – | – | – |"
                )
            a, b = cells["bpecore"], cells["tiktoken"]
            print(row + (f" {a['rps'] / b['rps']:.2f}x |" if a and b else " – |"))
    print(
        "\n| size | bpecore best MB/s over HTTP (concurrency) | in-process `count`, one thread, MB/s | HTTP / in-process |"
    )
    print("|---|---:|---:|---:|")
    for (route, label), path in bodies.items():
        if route != "count":
            continue
        size_mb = path.stat().st_size / 1e6
        best = max(
            (
                r
                for r in results
                if r["server"] == "bpecore" and r["route"] == route and r["size"] == label
            ),
            key=lambda r: r["rps"],
        )
        http_mbs = best["rps"] * size_mb
        print(
            f"| {label} | {http_mbs:.1f} ({best['concurrency']}) | {inproc[label]:.1f} | {http_mbs / inproc[label]:.0%} |"
        )
    print("\n| server | RSS after load | RSS after the load test |")
    print("|---|---:|---:|")
    for m in meta:
        print(f"| {m['server']} | {m['rss_loaded_mb']:.0f} MB | {m['rss_after_mb']:.0f} MB |")
    print(
        f"\n| server | start-up to /readyz 200, median of {args.startup_runs} (min-max) | RSS after load |"
    )
    print("|---|---:|---:|")
    for m in startup:
        print(
            f"| {m['server']} | {m['startup_s']:.2f} s ({m['min_s']:.2f}-{m['max_s']:.2f}) | "
            f"{m['rss_loaded_mb']:.0f} MB |"
        )
    print(
        "\nbpecore serves every shipped encoding by default (cl100k_base, o200k_base, o200k_harmony); the "
        "baseline loads cl100k_base only. Start-up is process start (Popen) to the first /readyz 200, "
        "the image's CMD run on the host; fresh processes, the three kinds in turn."
    )
    errors = sum(r["errors"] for r in results)
    if errors:
        print(f"\nWARNING: {errors} failed requests")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"results": results, "servers": meta, "startup": startup}, indent=2)
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
