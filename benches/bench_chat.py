"""Growing chat histories: the cost of appending one turn to a ChatCounter at turn 10 and turn 1,000.

Usage: python benches/bench_chat.py [--turns 1000] [--runs 200]
Builds a 1,000-turn history (user and assistant turns of ~60 words, a tool call with its result
every tenth turn), fills one ChatCounter to turn 10 and one to turn 1,000, and times adding a
next turn to each (best of --runs; every timed call gets a turn of its own, a text no call has
counted before in the process; the counter keeps the added turns, so turn 10 ends at 10 + runs).
For scale it also times recounting the whole request with count_request, which is what a gateway
does without a counter, each time with another new last turn. The append cost should not depend
on the turn.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-place build, if not installed
from bpecore.chat import ChatCounter, count_request

WORDS = "the of and to in a is that for it as with was on be by this are or from at but".split()


def history(turns: int, rng: random.Random) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a helpful assistant."}]
    for t in range(turns):
        text = " ".join(rng.choice(WORDS) for _ in range(60))
        if t % 10 == 9:
            call = {"id": f"c{t}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": text})
        else:
            msgs.append({"role": "user" if t % 2 else "assistant", "content": text})
    return msgs


def best(fn, items) -> float:
    """The shortest time of ``fn(item)`` over ``items``."""
    out = float("inf")
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out = min(out, time.perf_counter() - t0)
    return out


def new_turns(n: int, rng: random.Random) -> list[dict]:
    """``n`` user turns of 60 words, each a text not counted before (a random number starts it)."""
    return [
        {
            "role": "user",
            "content": f"turn {rng.random()} " + " ".join(rng.choice(WORDS) for _ in range(58)),
        }
        for _ in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    msgs = history(args.turns + 1, random.Random(0))
    rng = random.Random(1)
    print(f"{'turn':>6} {'append (us)':>12} {'recount (us)':>13}")
    for turn in (10, 100, args.turns):
        counter = ChatCounter("gpt-4o")
        counter.extend(msgs[:turn])

        recount_runs = max(3, args.runs // max(1, turn // 10))
        bodies = [
            {"model": "gpt-4o", "messages": msgs[:turn] + [last]}
            for last in new_turns(recount_runs, rng)
        ]
        print(
            f"{turn:>6} {best(counter.add, new_turns(args.runs, rng)) * 1e6:>12.1f}"
            f" {best(count_request, bodies) * 1e6:>13.1f}"
        )


if __name__ == "__main__":
    main()
