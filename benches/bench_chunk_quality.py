"""Chunk quality: what BM25 retrieves from each splitter's chunks, against evidence spans.

Usage: python benches/bench_chunk_quality.py [--sets prose code] [--budgets 128 256 512 1024]
                                             [--k 5] [--splitters NAME ...] [--code-chars N]
                                             [--dump FILE]
Question sets (each question has one or more character spans of its corpus as evidence):
  prose  the corpora and questions of Chroma's chunking evaluation (benches/data/chunk_eval, MIT;
         472 questions, 790 spans over 5 Markdown-ish documents, 1.45 MB)
  code   ../shared/corpora/code.1mb.txt.gz (concatenated CPython modules), its first --code-chars
         characters cut back to a prefix that ``ast`` parses. One question per function or method
         with a docstring: the query is the docstring and the function's name split into words,
         the evidence is the whole definition (decorators to the last line of the body). It asks
         whether the retrieved chunks hold the whole function the docstring describes.
bpecore rows: the default (which detects Python in the code set), ``balance=True``, and
``markdown=True`` on prose or ``language="text"`` (no detection) on code; --splitters bpecore
"bpecore balance=True" runs only those while iterating (the peers' rows do not change);
--dump FILE appends each question's recall, spans cut and retrieved spans as JSON lines, to see
which questions two splitters answer differently and why.
Every splitter gets the same budget counted with cl100k_base (tiktoken built from ../shared/vocab,
no network) and no overlap. Chunks are mapped back to character spans of the source (peers that
return text are located in it left to right; whitespace at the edges is not part of a span).
BM25 (bm25s, lower-cased alphanumeric runs split at underscores, English stop words dropped)
indexes each document's chunks; each question retrieves the top --k chunks of its document.
Columns, per splitter and budget:
  recall   mean over questions of |evidence & retrieved| / |evidence| (characters, spans merged)
  IoU      mean over questions of |evidence & retrieved| / |evidence | retrieved|
  cut      fraction of evidence spans not inside a single chunk (whitespace at their edges aside)
  tokens   mean chunk size in tokens (tiktoken, the chunk text as the splitter returns it)
  over     chunks over the budget by that count
  MB/s     UTF-8 bytes chunked per second of process CPU time, chunking only (best of --runs,
           after one untimed run that pays for first calls and the allocator's first pages;
           each run with splitters made anew and bpecore's piece cache emptied, so that no
           splitter's memo of counts carries one run's text into the next)
After the table: which splitters are not exact (a chunk over the budget in the table, or on the
first 300,000 characters of ../shared/corpora/adv_unicode, where a window of tokens decoded to
text need not encode back within the budget), and bpecore's speed against the fastest exact peer
per set and budget.
"""

from __future__ import annotations

import argparse
import ast
import csv
import gzip
import io
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-place build, if not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_chunk  # noqa: E402  (load_tiktoken: cl100k from ../shared/vocab, in tiktoken's registry)

import bpecore  # noqa: E402
from bpecore import piececache  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "chunk_eval"
SHARED = Path(__file__).resolve().parents[2] / "shared"

Spans = list[tuple[int, int]]
Splitter = Callable[[str], list[tuple[int, int, str]]]  # text -> (start, end, chunk text)


# ---------------------------------------------------------------------------- question sets
def prose_set() -> tuple[dict[str, str], list[tuple[str, str, Spans]]]:
    """Chroma's corpora and questions: ({doc: text}, [(doc, question, evidence spans)])."""
    docs = {
        p.name.removesuffix(".md.gz"): gzip.decompress(p.read_bytes()).decode("utf-8")
        for p in sorted((DATA / "corpora").glob("*.md.gz"))
    }
    rows = csv.DictReader(
        io.StringIO(gzip.decompress((DATA / "questions_df.csv.gz").read_bytes()).decode())
    )
    questions = []
    for row in rows:
        doc, spans = row["corpus_id"], []
        for ref in json.loads(row["references"]):
            s, e = ref["start_index"], ref["end_index"]
            if docs[doc][s:e] != ref["content"]:
                raise ValueError(f"evidence not at its offsets in {doc}: {ref['content'][:40]!r}")
            spans.append((s, e))
        questions.append((doc, row["question"], spans))
    return docs, questions


def code_set(chars: int) -> tuple[dict[str, str], list[tuple[str, str, Spans]]]:
    """Functions with docstrings in a parseable prefix of the code corpus (see the docstring)."""
    text = gzip.decompress((SHARED / "corpora" / "code.1mb.txt.gz").read_bytes()).decode("utf-8")
    text = text[:chars]
    while True:
        try:
            tree = ast.parse(text)
            break
        except SyntaxError as e:  # cut before the line that fails (the corpus ends mid-file)
            cut = sum(len(line) for line in text.splitlines(keepends=True)[: (e.lineno or 1) - 1])
            text = text[: text.rfind("\n", 0, max(0, cut - 1)) + 1]
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:  # ast columns are UTF-8 byte offsets
        start = line_starts[lineno - 1]
        line = text[start : line_starts[lineno]]
        return start + len(line.encode("utf-8")[:col].decode("utf-8", "ignore"))

    questions = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            is_def = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_def and not in_function and (doc := ast.get_docstring(child)):
                first = child.decorator_list[0] if child.decorator_list else child
                s = offset(first.lineno, first.col_offset)
                e = offset(child.end_lineno, child.end_col_offset)
                name = " ".join(w for w in child.name.split("_") if w)
                questions.append(("code", f"{name}: {doc}", [(s, e)]))
            visit(child, in_function or is_def)

    visit(tree, False)
    return {"code": text}, questions


# ---------------------------------------------------------------------------- splitters
def locate(text: str, chunks: list[str]) -> list[tuple[int, int, str]]:
    """Character spans of chunk texts found in ``text`` left to right (edges' whitespace and
    replacement characters of a cut multi-byte character excluded)."""
    out, cursor = [], 0
    for c in chunks:
        core = c.strip().strip("\ufffd").strip()
        if not core:
            continue
        i = text.find(core, cursor)
        if i < 0:
            i = text.find(core)  # a splitter whose chunks overlap or go back
        if i < 0:
            raise ValueError(f"chunk not found in its source: {core[:60]!r}")
        out.append((i, i + len(core), c))
        cursor = i + 1
    return out


def splitters(tik, budget: int, code: bool) -> dict[str, Splitter]:
    enc = bpecore.get_encoding("cl100k_base")
    out: dict[str, Splitter] = {}

    def ours(**options) -> Splitter:
        return lambda text: [
            (c.start, c.end, c.text) for c in bpecore.chunk(text, enc, budget, **options)
        ]

    out["bpecore"] = ours()  # on code: the language detected (Python)
    out["bpecore balance=True"] = ours(balance=True)
    if code:
        out["bpecore language=text"] = ours(language="text")
    else:
        out["bpecore markdown"] = ours(markdown=True)

    def text_splitter(split: Callable[[str], list[str]]) -> Splitter:
        return lambda text: locate(text, split(text))

    try:
        from semantic_text_splitter import MarkdownSplitter, TextSplitter

        out["semantic-text-splitter"] = text_splitter(
            TextSplitter.from_tiktoken_model("gpt-4", budget).chunks
        )
        if not code:
            out["sts MarkdownSplitter"] = text_splitter(
                MarkdownSplitter.from_tiktoken_model("gpt-4", budget).chunks
            )
    except ImportError:
        print("# semantic-text-splitter not installed: skipped", file=sys.stderr)
    try:
        from chonkie import RecursiveChunker, SentenceChunker, TokenChunker

        def chonkie(chunker) -> Splitter:
            return lambda text: [(c.start_index, c.end_index, c.text) for c in chunker.chunk(text)]

        out["chonkie token"] = chonkie(TokenChunker(tik, chunk_size=budget, chunk_overlap=0))
        out["chonkie sentence"] = chonkie(SentenceChunker(tik, chunk_size=budget, chunk_overlap=0))
        out["chonkie recursive"] = chonkie(RecursiveChunker(tik, chunk_size=budget))
    except ImportError:
        print("# chonkie not installed: skipped", file=sys.stderr)
    try:
        import semchunk

        chunker = semchunk.chunkerify(tik, budget)

        def semchunk_split(text: str) -> list[tuple[int, int, str]]:
            chunks, offsets = chunker(text, offsets=True)
            return [(s, e, c) for c, (s, e) in zip(chunks, offsets)]

        out["semchunk"] = semchunk_split
    except ImportError:
        print("# semchunk not installed: skipped", file=sys.stderr)
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

        out["langchain token"] = text_splitter(
            TokenTextSplitter(
                encoding_name="cl100k_base", chunk_size=budget, chunk_overlap=0
            ).split_text
        )
        out["langchain recursive"] = text_splitter(
            RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                encoding_name="cl100k_base", chunk_size=budget, chunk_overlap=0
            ).split_text
        )
    except ImportError:
        print("# langchain-text-splitters not installed: skipped", file=sys.stderr)
    try:
        from llama_index.core.node_parser import SentenceSplitter

        out["llamaindex sentence"] = text_splitter(
            SentenceSplitter(chunk_size=budget, chunk_overlap=0, tokenizer=tik.encode).split_text
        )
    except ImportError:
        print("# llama-index-core not installed: skipped", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------- retrieval, metrics
_STOP: frozenset[str] = frozenset()
_WORDS = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return [w for w in _WORDS.findall(text.lower()) if w not in _STOP] or ["_"]


def merged(spans: Spans) -> Spans:
    out: Spans = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def overlap(a: Spans, b: Spans) -> int:
    """Characters in both unions of (merged, sorted) spans."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def stripped(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def evaluate(
    docs, questions, chunked, k: int, rows: list[dict] | None = None
) -> tuple[float, float, float]:
    """(recall, IoU, cut rate) of BM25 top-k over ``chunked`` ({doc: [(start, end, text)]});
    with ``rows``, one dict per question is appended to it (its recall, spans cut, and the
    retrieved chunks' spans)."""
    import bm25s

    retrievers, spans_of = {}, {}
    for doc, chunks in chunked.items():
        retrievers[doc] = bm25s.BM25()
        retrievers[doc].index([words(c[2]) for c in chunks], show_progress=False)
        spans_of[doc] = [(s, e) for s, e, _ in chunks]
    by_doc: dict[str, list[int]] = {}
    for i, (doc, _, _) in enumerate(questions):
        by_doc.setdefault(doc, []).append(i)
    recall = iou = 0.0
    cut = n_spans = 0
    for doc, idx in by_doc.items():
        chunk_spans = spans_of[doc]
        top = min(k, len(chunk_spans))
        hits, _ = retrievers[doc].retrieve(
            [words(questions[i][1]) for i in idx], k=top, show_progress=False, n_threads=1
        )
        starts = sorted(chunk_spans)
        for row, i in zip(hits, idx):
            evidence = merged([stripped(docs[doc], s, e) for s, e in questions[i][2]])
            got = merged([chunk_spans[int(h)] for h in row])
            both = overlap(evidence, got)
            size_e = sum(e - s for s, e in evidence)
            size_g = sum(e - s for s, e in got)
            recall += both / size_e
            iou += both / (size_e + size_g - both)
            cut_here = 0
            for s, e in evidence:
                n_spans += 1
                cut_here += not any(cs <= s and e <= ce for cs, ce in starts)
            cut += cut_here
            if rows is not None:
                rows.append(
                    {"question": i, "doc": doc, "recall": both / size_e, "cut": cut_here}
                    | {"evidence": evidence, "retrieved": [chunk_spans[int(h)] for h in row]}
                )
    return recall / len(questions), iou / len(questions), cut / n_spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["prose", "code"], choices=["prose", "code"])
    ap.add_argument("--budgets", nargs="+", type=int, default=[128, 256, 512, 1024])
    ap.add_argument("--k", type=int, default=5, help="chunks retrieved per question")
    ap.add_argument("--splitters", nargs="+", default=None, help="subset of splitters to run")
    ap.add_argument("--code-chars", type=int, default=1 << 20, help="code corpus prefix to use")
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="best of this many timed runs, each from fresh splitters",
    )
    ap.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write one JSON line per splitter, budget and question here (recall, spans cut, "
        "evidence and retrieved spans): to compare two splitters question by question",
    )
    args = ap.parse_args()

    global _STOP
    from bm25s.stopwords import STOPWORDS_EN

    _STOP = frozenset(STOPWORDS_EN)
    tik = bench_chunk.load_tiktoken()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"commit {commit}, k={args.k}, clock=process CPU, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"| {'set':5} | {'budget':>6} | {'splitter':24} | {'recall':>6} | {'IoU':>5} | {'cut':>5} "
        f"| {'tokens':>6} | {'over':>4} | {'MB/s':>6} |"
    )
    print(
        f"|{'-' * 7}|{'-' * 8}|{'-' * 26}|{'-' * 8}|{'-' * 7}|{'-' * 7}|{'-' * 8}|{'-' * 6}|{'-' * 8}|"
    )
    speed: dict[tuple[str, int, str], float] = {}
    inexact: set[str] = set()
    for name in args.sets:
        docs, questions = prose_set() if name == "prose" else code_set(args.code_chars)
        mb = sum(len(t.encode("utf-8")) for t in docs.values()) / 1e6
        print(
            f"# {name}: {len(docs)} documents, {mb:.2f} MB, {len(questions)} questions",
            file=sys.stderr,
        )
        for budget in args.budgets:
            contenders = splitters(tik, budget, name == "code")
            if args.splitters:
                contenders = {k: v for k, v in contenders.items() if k in args.splitters}
            for label, split in contenders.items():
                best, chunked = float("inf"), {}
                for run in range(args.runs + 1):  # run 0: untimed
                    if run:  # semchunk and chonkie memoize counts per splitter
                        split = splitters(tik, budget, name == "code")[label]
                    # bpecore's piece cache lives in the process: emptied so that every run
                    # counts first-seen text, like the fresh splitters
                    size = piececache.get_cache_size()
                    piececache.set_cache_size(0)
                    piececache.set_cache_size(size)
                    t0 = time.process_time()
                    chunked = {doc: split(text) for doc, text in docs.items()}
                    if run:
                        best = min(best, time.process_time() - t0)
                counts = [len(tik.encode_ordinary(c[2])) for cs in chunked.values() for c in cs]
                rows: list[dict] | None = [] if args.dump else None
                recall, iou, cut = evaluate(docs, questions, chunked, args.k, rows)
                speed[name, budget, label] = mb / best
                if any(c > budget for c in counts):
                    inexact.add(label)
                if rows:
                    with args.dump.open("a") as f:
                        for r in rows:
                            f.write(
                                json.dumps({"set": name, "budget": budget, "splitter": label} | r)
                                + "\n"
                            )
                print(
                    f"| {name:5} | {budget:6d} | {label:24} | {recall:6.3f} | {iou:5.3f} | {cut:5.3f} "
                    f"| {sum(counts) / len(counts):6.1f} | {sum(c > budget for c in counts):4d} "
                    f"| {mb / best:6.2f} |",
                    flush=True,
                )
    inexact |= probe_exactness(tik, args.budgets, args.splitters)
    print(f"# over the budget somewhere (not exact): {', '.join(sorted(inexact)) or 'none'}")
    for (name, budget, label), mbs in speed.items():
        if label != "bpecore":
            continue
        exact = {
            k[2]: v
            for k, v in speed.items()
            if k[:2] == (name, budget) and not k[2].startswith("bpecore") and k[2] not in inexact
        }
        if exact:
            peer = max(exact, key=exact.__getitem__)
            print(
                f"# {name} {budget}: bpecore {mbs:.1f} MB/s, {mbs / exact[peer]:.1f}x the fastest "
                f"exact peer ({peer}, {exact[peer]:.2f} MB/s)"
            )


PROBE_CHARS = 300_000


def probe_exactness(tik, budgets: list[int], only: list[str] | None) -> set[str]:
    """The splitters that return a chunk over the budget on the first PROBE_CHARS characters of
    ../shared/corpora/adv_unicode (random code points, where a window of tokens decoded to text
    need not encode back within the window: such splitters are not exact, even where the question
    sets show nothing over)."""
    text = gzip.decompress((SHARED / "corpora" / "adv_unicode.1mb.txt.gz").read_bytes()).decode()
    text = text[:PROBE_CHARS]
    found: set[str] = set()
    for budget in budgets:
        for label, split in splitters(tik, budget, False).items():
            if only and label not in only:
                continue
            over = sum(len(tik.encode_ordinary(c[2])) > budget for c in split(text))
            if over:
                found.add(label)
            print(f"# adv_unicode {budget}: {label} {over} chunks over", file=sys.stderr)
    return found


if __name__ == "__main__":
    main()
