"""Train a byte-level BPE vocabulary: ``train(files or texts, vocab_size, pattern, ...) -> Encoding``.

Pipeline (README, "Training"):
1. Read the input in chunks cut at document boundaries and count pre-tokenized pieces in worker
   processes (each returns a Counter of piece bytes; they are summed at the end). Files are
   streamed, so they may be larger than memory; only the piece counts are kept.
2. Merge pairs in the Cython ``Trainer`` (pair counts, pair -> words index, lazy max-heap) until
   the vocabulary is full or the best pair is rarer than ``min_frequency``.
3. Optional SuperBPE stage: after ``superbpe_transition`` merges (``"auto"``: 80% of the BPE ids),
   pieces of ``SUPERBPE_PATTERN`` (words joined by single spaces and lone punctuation, up to the
   newlines that end them) are encoded with the stage-1 vocab and training goes on over them, so
   later tokens may span words.

Chunk cuts: a chunk ends after a newline followed by a letter. No piece of the shipped patterns
(cl100k, o200k, r50k) or of ``SUPERBPE_PATTERN`` spans such a place, so counts do not depend on
the chunking or on ``workers``. Special-token strings in the input delimit documents and are not
counted. A run of more than ``MAX_CARRY`` bytes without a cut point is cut where it stands.

Past one machine (README, "Training past one machine"): step 1 alone is ``count_pieces``, which
any engine can run on its partitions (``split_text`` and ``file_shards`` cut text and files at the
same cut points); the ``PieceCounts`` add up, and ``train(counts=...)`` runs steps 2-3 on one node.
"""

from __future__ import annotations

import argparse
import codecs
import gzip
import multiprocessing as mp
import os
import queue
import struct
import sys
import time
from collections import _count_elements  # type: ignore[attr-defined]  # Counter.update's C loop
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import regex

from bpecore._exitcodes import EXIT_INPUT, EXIT_SHORT_VOCAB, EXIT_USAGE, CLIError
from bpecore._progress import Progress
from bpecore._text import utf8
from bpecore.counts import PieceCounts
from bpecore.encoding import Encoding
from bpecore.patterns import NAMED_PATTERNS, resolve_pattern
from bpecore.pretokenize import pattern_kind
from bpecore.trainer import Trainer
from bpecore.trainer import count_pieces as _count_scanned

_MARK = r"[^\s\p{L}\p{N}]"  # one punctuation or symbol character
#: SuperBPE stage-2 pre-tokenization (Liu et al. 2025, "SuperBPE: Space Travel for Language
#: Models"): whitespace no longer cuts, so a piece is a run of words joined by single spaces (or
#: tabs) and lone punctuation ("by the way", ", and the", "e.g. the"), with the newlines that end
#: it. As in the paper's stage 2, digit groups (1-3), runs of two or more punctuation characters
#: (code operators, "()."), and runs of spaces before whitespace are pieces of their own, and a
#: superword has no length cap. Unlike the paper, a piece never starts with or crosses a newline
#: (it may end with newlines, as the paper's do): that keeps the training chunks, cut at
#: "newline + letter", exact. Measured on benches/bench_train.py, 8k ids, held-out English vs plain
#: BPE: 8.0% fewer tokens with lone punctuation and newlines apart, 9.4% with lone punctuation
#: joined, 12.9% with trailing newlines joined too (this pattern), 10.8% with a 4-word cap on
#: pieces. The Encoding returned by a SuperBPE run encodes with this pattern.
SUPERBPE_PATTERN = "|".join(
    [
        r"""\p{N}{1,3}""",
        rf"""(?:[^\S\r\n]?(?:[\p{{L}}\p{{M}}]+|{_MARK}(?!{_MARK})))+[\r\n]*""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
#: Default SuperBPE transition (``superbpe_transition="auto"``): stage 1 stops when the BPE ids
#: (256 bytes + merges; specials not counted) reach this fraction of their total. The paper's
#: 200k-id tokenizers switch at 80k (most compression: 33% fewer tokens than BPE) or at 180k (its
#: headline model, best downstream: 27% fewer). Here the held-out English gain is flat from 0.4
#: to 0.8 (within 0.3 points at 8k and 32k: 12.9-13.0% and 20.1-20.4%), 0.9 loses 0.7-1.6 points,
#: and 0.8 compresses the whole held-out mix best at 32k (11.6% vs 10.9-11.0%): 0.8 at any size.
SUPERBPE_DEFAULT_FRACTION = 0.8


def default_superbpe_transition(n_bpe_ids: int) -> int:
    """Stage-1 merges of ``superbpe_transition="auto"`` for ``n_bpe_ids`` BPE ids (bytes + merges).

    >>> default_superbpe_transition(8000), default_superbpe_transition(32000)
    (6144, 25344)
    """
    return max(0, int(SUPERBPE_DEFAULT_FRACTION * n_bpe_ids) - 256)


CHUNK_BYTES = 1 << 20  #: target size of one task sent to a worker
MAX_CARRY = 1 << 26  #: longest text kept waiting for a cut point before it is cut anyway
_NONE_KIND = pattern_kind(None)
_REGEX_KIND = pattern_kind(r"\X")
_CUT = regex.compile(r"(?r)\n(?=\p{L})")
_CUT_FORWARD = regex.compile(r"\n(?=\p{L})")
_LETTER = regex.compile(r"\p{L}")


@dataclass
class TrainingReport:
    """What ``train`` did; attached to the returned Encoding as ``enc.training``."""

    merges: list[tuple[bytes, bytes]] = field(
        default_factory=list
    )  #: in rank order (token 256 + k)
    stages: list[int] = field(default_factory=list)  #: 1 or 2 (SuperBPE) for each merge
    pattern: str | None = None  #: stage-1 pattern
    encode_pattern: str | None = None  #: the pattern of the returned Encoding
    input_bytes: int = 0
    unique_pieces: int = 0
    pretokenize_seconds: float = 0.0
    merge_seconds: float = 0.0


@dataclass(frozen=True)
class FileSlice:
    """(Decompressed) bytes ``start:end`` of a file; ``train`` and ``count_pieces`` read it like a
    file path. ``file_shards`` makes slices that start and end at cut points."""

    path: str
    end: int
    start: int = 0


# ----------------------------------------------------------------------------- reading
def _open(path: str | os.PathLike):
    f = open(path, "rb")
    if f.read(2) == b"\x1f\x8b":
        f.close()
        return gzip.open(path, "rb")
    f.seek(0)
    return f


def input_size(path: str | os.PathLike) -> int:
    """Decompressed size of a file (for gzip: the ISIZE trailer, exact below 4 GiB)."""
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            return os.path.getsize(path)
        f.seek(-4, os.SEEK_END)
        return struct.unpack("<I", f.read(4))[0]


def _cut(text: str) -> int:
    """Offset of the last cut point in ``text`` (after a newline followed by a letter), or 0."""
    m = _CUT.search(text)
    return m.end() if m else 0


def _file_chunks(
    source: str | os.PathLike | FileSlice, block: int = CHUNK_BYTES
) -> Iterator[tuple[str, int]]:
    """(text, bytes read) chunks of a file, each ending at a cut point (or at the end)."""
    if isinstance(source, FileSlice):
        path, start, remaining = source.path, source.start, max(0, source.end - source.start)
    else:
        path, start, remaining = source, 0, None
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    carry = ""
    with _open(path) as f:
        if start:
            f.seek(start)  # gzip: decompresses up to ``start``
        while True:
            n = block if remaining is None else min(block, remaining)
            data = f.read(n) if n > 0 else b""
            if remaining is not None:
                remaining -= len(data)
            final = not data
            text = carry + decoder.decode(data, final=final)
            if final:
                if text:
                    yield text, len(data)
                return
            cut = _cut(text)
            if cut == 0 and len(text) > MAX_CARRY:
                cut = len(text)
            if cut:
                yield text[:cut], len(data)
                carry = text[cut:]
            else:
                carry = text
                yield "", len(data)


def _tasks(sources: Sequence, texts: Iterable[str] | None) -> Iterator[tuple[list[str], int]]:
    """Tasks for the workers: (list of documents, input bytes they stand for)."""
    if texts is None:
        for source in sources:
            for text, nbytes in _file_chunks(source):
                if text:
                    yield [text], nbytes
                elif nbytes:
                    yield [], nbytes
        return
    batch: list[str] = []
    size = 0
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(
                f"train() expects file paths or an iterable of str, got {type(text).__name__}"
            )
        batch.append(text)
        size += len(text)
        if size >= CHUNK_BYTES:
            yield batch, size
            batch, size = [], 0
    if batch:
        yield batch, size


def _is_gzip(path: str | os.PathLike) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _worker_tasks(
    sources: Sequence, texts: Iterable[str] | None
) -> Iterator[tuple[list[str] | FileSlice, int]]:
    """``_tasks`` for worker processes: a plain file goes as ``FileSlice`` ranges of about
    ``4 * CHUNK_BYTES`` cut at cut points, which each worker reads itself (this process only
    finds the cuts); gzip files and texts are read here and sent as text."""
    for source in sources if texts is None else ():
        path = source.path if isinstance(source, FileSlice) else source
        if _is_gzip(path):
            yield from _tasks([source], None)
            continue
        start, end = (source.start, source.end) if isinstance(source, FileSlice) else (0, None)
        for piece in _shard_range(path, 4 * CHUNK_BYTES, start, end):
            yield piece, piece.end - piece.start
    if texts is not None:
        yield from _tasks(sources, texts)


# ----------------------------------------------------------------------------- counting
class _Counter:
    """Counts the pieces of documents for one or two patterns (used inside each worker).

    Patterns with a hand-written scanner (cl100k, o200k, r50k) are cut and counted in C
    (``trainer.count_pieces``, ~20 MB/s); any other pattern goes through ``regex.findall``.
    """

    def __init__(self, patterns: list[str | None], specials: list[str]):
        self.kinds = [pattern_kind(p) for p in patterns]
        self.regexes = [
            regex.compile(p) if p is not None and k == _REGEX_KIND else None
            for p, k in zip(patterns, self.kinds)
        ]
        self.special = (
            regex.compile(
                "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True))
            )
            if specials
            else None
        )
        self.counts: list[dict] = [
            {} for _ in patterns
        ]  # bytes keys (scanned) or str keys (regex, None)

    def add(self, docs: list[str]) -> None:
        for doc in docs:
            parts = self.special.split(doc) if self.special is not None else (doc,)
            for part in parts:
                if not part:
                    continue
                data = None
                for kind, rx, counts in zip(self.kinds, self.regexes, self.counts):
                    if rx is not None:
                        _count_elements(counts, rx.findall(part))
                    elif kind == _NONE_KIND:
                        counts[part] = counts.get(part, 0) + 1
                    else:
                        if data is None:
                            data = utf8(part)  # lone surrogates: U+FFFD, as Encoding does
                        _count_scanned(kind, data, counts)

    def result(self) -> list[dict[bytes, int]]:
        out = []
        for kind, rx, counts in zip(self.kinds, self.regexes, self.counts):
            if rx is None and kind != _NONE_KIND:
                out.append(counts)
                continue
            d: dict[bytes, int] = {}
            for piece, n in counts.items():
                key = utf8(piece)  # lone surrogates: U+FFFD, as Encoding does
                d[key] = d.get(key, 0) + n
            out.append(d)
        return out


def _worker(
    tasks: mp.Queue, results: mp.Queue, patterns: list[str | None], specials: list[str]
) -> None:
    counter = _Counter(patterns, specials)
    while True:
        task = tasks.get()
        if task is None:
            break
        if isinstance(task[0], FileSlice):
            for text, _ in _file_chunks(task[0]):
                counter.add([text])
        else:
            counter.add(task[0])
        results.put(("progress", task[1]))
    results.put(("done", counter.result()))


def _merge_counts(total: list[dict[bytes, int]], part: list[dict[bytes, int]]) -> None:
    for i, p in enumerate(part):
        t = total[i]
        if len(t) < len(
            p
        ):  # add the smaller dict into the larger one (the first is taken as it is)
            total[i], t, p = p, p, t
        get = t.get
        for k, v in p.items():
            t[k] = get(k, 0) + v


def _count_all(
    sources: Sequence,
    texts: Iterable[str] | None,
    patterns: list[str | None],
    specials: list[str],
    workers: int,
    progress=None,
) -> tuple[list[dict[bytes, int]], int]:
    """Piece counts for each pattern and the number of input bytes read."""
    total_bytes = 0
    if workers <= 1:
        counter = _Counter(patterns, specials)
        for docs, nbytes in _tasks(sources, texts):
            counter.add(docs)
            total_bytes += nbytes
            if progress:
                progress(total_bytes)
        return counter.result(), total_bytes
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    tasks: mp.Queue = ctx.Queue(maxsize=workers)
    results: mp.Queue = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(tasks, results, patterns, specials), daemon=True)
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    totals: list[dict[bytes, int]] = [{} for _ in patterns]
    finished = 0

    def drain(block: bool) -> None:
        nonlocal total_bytes, finished
        while True:
            try:
                kind, payload = results.get(block=block, timeout=None if block else 0)
            except queue.Empty:
                return
            if kind == "progress":
                total_bytes += payload
                if progress:
                    progress(total_bytes)
            else:
                _merge_counts(totals, payload)
                finished += 1
            if block:
                return

    try:
        for task in _worker_tasks(sources, texts):
            while True:
                try:
                    tasks.put(task, timeout=0.05)
                    break
                except queue.Full:  # show progress while waiting
                    drain(False)
            drain(False)
        for _ in procs:
            tasks.put(None)
        while finished < workers:
            drain(True)
            if finished < workers and not any(p.is_alive() for p in procs) and results.empty():
                raise RuntimeError("a pre-tokenization worker died")
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
    return totals, total_bytes


# ----------------------------------------------------------------------------- partitions
def split_text(text: str, max_chars: int) -> list[str]:
    """``text`` cut into parts of at most ``max_chars`` characters, each ending at a cut point
    (after a newline followed by a letter), so counting the parts apart gives the counts of the
    whole. A part is longer only where no cut point falls within ``max_chars``.

    >>> split_text("one\\ntwo\\nthree\\n", 6)
    ['one\\n', 'two\\n', 'three\\n']
    """
    if max_chars < 1:
        raise ValueError("max_chars must be >= 1")
    parts, pos, n = [], 0, len(text)
    while n - pos > max_chars:
        m = _CUT.search(text, pos, pos + max_chars + 1)  # the letter may be just past the limit
        if m is None or m.end() <= pos:
            m = _CUT_FORWARD.search(text, pos + max_chars)
            if m is None:
                break
        parts.append(text[pos : m.end()])
        pos = m.end()
    if pos < n:
        parts.append(text[pos:])
    return parts


def _char_len(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte starts (1 for a byte that starts none)."""
    return (
        2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 1
    )


def _next_cut(f, offset: int, block: int = 1 << 16) -> int | None:
    """The first cut point (the byte offset after a newline followed by a letter) at or after
    ``offset`` in the binary file ``f``, which is positioned at ``offset``; None if there is none.
    The bytes after the newline are decoded as ``_file_chunks`` does (invalid: U+FFFD, no letter).
    """
    buf, base, scan = b"", offset, 0  # buf holds the file's bytes [base, base + len(buf))
    while True:
        data = f.read(block)
        buf += data
        while True:
            i = buf.find(b"\n", scan)
            if i < 0:
                scan = len(buf)
                break
            n = _char_len(buf[i + 1]) if i + 1 < len(buf) else 1
            if i + 1 + n > len(buf) and data:
                scan = i  # the character after the newline is not all read yet
                break
            if _LETTER.match(buf[i + 1 : i + 1 + n].decode("utf-8", "replace")[:1]):
                return base + i + 1
            scan = i + 1
        if not data:
            return None
        base, buf, scan = base + scan, buf[scan:], 0


def file_shards(path: str | os.PathLike, shard_bytes: int) -> list[FileSlice]:
    """Slices of about ``shard_bytes`` (decompressed) bytes covering the file, each starting and
    ending at a cut point: shards a cluster can count apart (``count_pieces(shard)``) and still
    get the counts of the whole file. A gzip file is readable in slices, but each decompresses
    from its start: shard a corpus of many gzip files by file instead.
    """
    if shard_bytes < 1:
        raise ValueError("shard_bytes must be >= 1")
    return _shard_range(os.fspath(path), shard_bytes)


def _shard_range(
    path: str, shard_bytes: int, start: int = 0, end: int | None = None
) -> list[FileSlice]:
    """``file_shards`` of the byte range ``start:end`` of a file (``start`` a cut point or 0)."""
    size = input_size(path) if end is None else end
    cuts = [start]
    with _open(path) as f:
        target = start + shard_bytes
        while target < size:
            f.seek(target)
            cut = _next_cut(f, target)
            if cut is None or cut >= size:
                break
            cuts.append(cut)
            target = cut + shard_bytes
    cuts.append(size)
    return [FileSlice(path, e, s) for s, e in zip(cuts, cuts[1:]) if e > s]


# ----------------------------------------------------------------------------- counts
def _is_path(x) -> bool:
    return isinstance(x, (os.PathLike, FileSlice)) or (isinstance(x, str) and os.path.isfile(x))


def _sources(files) -> tuple[list, Iterable[str] | None]:
    """(file sources, None) for a path or list of paths; ([], texts) for an iterable of str."""
    if isinstance(files, (str, os.PathLike, FileSlice)):
        if not _is_path(files):
            raise FileNotFoundError(f"no such file: {files}")
        return [files], None
    if isinstance(files, (list, tuple)) and files and all(_is_path(f) for f in files):
        return list(files), None
    return [], files


def _input_total(sources: list) -> int | None:
    if not sources:
        return None
    return sum(s.end - s.start if isinstance(s, FileSlice) else input_size(s) for s in sources)


def _special_strings(special_tokens) -> list[str]:
    return list(special_tokens) if special_tokens else []


def count_pieces(
    files: str | os.PathLike | Iterable[str | os.PathLike] | Iterable[str],
    pattern: str | None = "o200k",
    special_tokens: dict[str, int] | Sequence[str] | None = None,
    *,
    superbpe: bool = False,
    workers: int | None = 1,
    progress: bool = False,
) -> PieceCounts:
    """Count the pieces the pre-tokenizer cuts: ``train``'s first step, as a map step.

    Counts of any partition of a corpus add up to the counts of the whole (``sum(parts)``), when
    the parts end at document boundaries (each ``str`` is a document, each file is one) or at
    cut points (``split_text``, ``file_shards``). ``train(counts=...)`` then gives the merges
    ``train(files)`` gives.

    Args:
        files: as ``train``'s: a path, a list of paths (``FileSlice`` too), or an iterable of
            ``str`` documents (a list, a pandas Series, an engine's partition).
        pattern: as ``train``'s (a name of ``bpecore.patterns.NAMED_PATTERNS`` or a regex).
        special_tokens: special-token strings (or ``{string: id}``); they delimit documents and
            are not counted. ``train(counts=...)`` needs the same strings.
        superbpe: count the SuperBPE stage-2 pieces (``SUPERBPE_PATTERN``) too, which
            ``train(counts=..., superbpe_transition=...)`` needs.
        workers: counting processes on this machine (1: in this process, the default for a map
            step; None: the CPU count, as ``train``).
        progress: draw a progress bar on stderr.

    >>> c = count_pieces(["low lower<|endoftext|>lowest"], special_tokens=["<|endoftext|>"])
    >>> sorted(c.pieces.items()), c.input_bytes
    ([(b' lower', 1), (b'low', 1), (b'lowest', 1)], 28)
    """
    pattern = resolve_pattern(pattern)
    sources, texts = _sources(files)
    specials = _special_strings(special_tokens)
    patterns = [pattern, SUPERBPE_PATTERN] if superbpe else [pattern]
    total = _input_total(sources)
    if workers is None:
        workers = 1 if total is not None and total <= 2 * CHUNK_BYTES else (os.cpu_count() or 1)
    bar = Progress("count pieces", total, "MB", 1e6) if progress else None
    tables, nbytes = _count_all(sources, texts, patterns, specials, workers, bar)
    if bar:
        bar.close(nbytes)
    return PieceCounts(
        pattern,
        specials,
        tables[0],
        SUPERBPE_PATTERN if superbpe else None,
        tables[1] if superbpe else None,
        nbytes,
    )


def _load_counts(counts) -> PieceCounts:
    if isinstance(counts, PieceCounts):
        return counts
    if isinstance(counts, (str, os.PathLike)):
        return PieceCounts.load(counts)
    items = list(counts)
    if items and all(isinstance(c, PieceCounts) for c in items):
        total = items[0].copy()
        for c in items[1:]:
            total += c  # in place: sum() would copy the running total at every step
        return total
    return PieceCounts.load(items)


class _DefaultPattern(str):
    """``train``'s default pattern: o200k for files, the counts' own for ``counts=``."""

    __slots__ = ()


# ----------------------------------------------------------------------------- train
def train(
    files: str | os.PathLike | Iterable[str | os.PathLike] | Iterable[str] | None = None,
    vocab_size: int = 32000,
    pattern: str | None = _DefaultPattern("o200k"),
    special_tokens: dict[str, int] | Sequence[str] | None = None,
    min_frequency: int = 2,
    workers: int | None = None,
    superbpe_transition: int | str | None = None,
    name: str = "trained",
    progress: bool = False,
    *,
    counts: PieceCounts | str | os.PathLike | Iterable | None = None,
) -> Encoding:
    """Train a byte-level BPE vocabulary and return it as an ``Encoding``.

    Args:
        files: a file path, a list of file paths (plain or gzip UTF-8), or an iterable of ``str``
            documents. A ``str`` is a path when such a file exists; a list is of paths when every
            item is one.
        vocab_size: total number of ids: 256 byte tokens + merges + special tokens.
        pattern: a name of ``bpecore.patterns.NAMED_PATTERNS`` (``"o200k"``, ``"cl100k"``,
            ``"r50k"``, ...) or a regex (``regex`` module syntax); ``None`` makes each document
            one piece. Default ``"o200k"``; with ``counts``, the counts' pattern.
        special_tokens: ``{string: id}``, or a list of strings given the ids after the BPE ids.
            Their strings in the input delimit documents and are not trained on. With ``counts``:
            the strings they were counted with (default: those, in sorted order).
        min_frequency: stop when the most frequent pair occurs fewer times.
        workers: pre-tokenization processes (default: CPU count; 1 = in this process).
        superbpe_transition: if set, the number of merges made over ``pattern`` pieces before
            training goes on over ``SUPERBPE_PATTERN`` pieces (SuperBPE); the returned Encoding
            then encodes with ``SUPERBPE_PATTERN``. ``"auto"``: ``default_superbpe_transition``
            of the BPE ids (80% of them). With ``counts``, they must hold the superword counts
            (``count_pieces(..., superbpe=True)``).
        name: the Encoding's name.
        progress: draw progress bars on stderr.
        counts: instead of ``files``, piece counts made by ``count_pieces``: a ``PieceCounts``,
            a list of them, or paths of saved ones (files or a directory); summed, then merged
            here. Same merges as ``train(files)`` on the text they counted.

    Returns:
        an Encoding whose token ``256 + k`` is merge ``k``; ``enc.training`` is a TrainingReport.

    >>> enc = train(["low lower lowest"] * 3, vocab_size=260, min_frequency=2, workers=1)
    >>> [enc.decode([t]) for t in range(256, enc.n_vocab)]
    ['lo', 'low', ' low', ' lowe']
    >>> again = train(counts=count_pieces(["low lower lowest"] * 3), vocab_size=260)
    >>> again.training.merges == enc.training.merges
    True
    """
    if (files is None) == (counts is None):
        raise TypeError("train() takes either files or counts=")
    t0 = time.perf_counter()
    if counts is not None:
        counts = _load_counts(counts)
        if isinstance(pattern, _DefaultPattern):
            pattern = counts.pattern
        elif resolve_pattern(pattern) != counts.pattern:
            raise ValueError(
                f"pattern {pattern!r} is not the pattern the counts were made with "
                f"({counts.pattern!r})"
            )
        if special_tokens is None:
            special_tokens = list(counts.special_tokens)
        elif sorted(set(special_tokens)) != list(counts.special_tokens):
            raise ValueError(
                f"special tokens {sorted(special_tokens)} are not the ones the counts were made "
                f"with ({list(counts.special_tokens)}): they delimit documents when counting"
            )
    pattern = resolve_pattern(pattern)
    if special_tokens is None:
        special_tokens = {}
    specials = list(special_tokens)
    n_merges = vocab_size - 256 - len(specials)
    if n_merges < 0:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room for the 256 byte tokens and {len(specials)} specials"
        )
    if superbpe_transition == "auto":
        superbpe_transition = default_superbpe_transition(n_merges + 256)
    elif superbpe_transition is not None and (
        isinstance(superbpe_transition, str) or superbpe_transition < 0
    ):
        raise ValueError(f"superbpe_transition must be >= 0 or 'auto', not {superbpe_transition!r}")
    report = TrainingReport(pattern=pattern, encode_pattern=pattern)

    if counts is not None:
        tables: list[dict[bytes, int]] = [counts.pieces]
        if superbpe_transition is not None:
            if counts.superwords is None or counts.superword_pattern != SUPERBPE_PATTERN:
                raise ValueError(
                    "SuperBPE from counts needs the superword counts: "
                    "count_pieces(..., superbpe=True)"
                )
            tables.append(counts.superwords)
        report.input_bytes = counts.input_bytes
        del counts  # the tables are dropped one by one below (unless the caller holds them)
    else:
        sources, texts = _sources(files)
        patterns = [pattern] if superbpe_transition is None else [pattern, SUPERBPE_PATTERN]
        total = _input_total(sources)
        if workers is None:
            # below two chunks a second process costs more (fork, pickling) than it saves
            workers = 1 if total is not None and total <= 2 * CHUNK_BYTES else (os.cpu_count() or 1)
        bar = Progress("pre-tokenize", total, "MB", 1e6) if progress else None
        tables, report.input_bytes = _count_all(sources, texts, patterns, specials, workers, bar)
        if bar:
            bar.close(report.input_bytes)
    counts = tables
    report.unique_pieces = len(counts[0])
    t1 = time.perf_counter()
    report.pretokenize_seconds = t1 - t0

    first = n_merges if superbpe_transition is None else min(n_merges, superbpe_transition)
    bar = Progress("merges", n_merges, "k merges", 1e3) if progress else None
    trainer = Trainer([bytes([b]) for b in range(256)], min_frequency)
    trainer.add_pieces(counts[0])
    del counts[0]
    merges = trainer.train(first, progress=bar)
    tokens = trainer.token_bytes()
    del trainer  # its tables go before the next ones (stage 2, the Vocab) are built
    report.stages = [1] * len(merges)
    if superbpe_transition is not None and len(merges) == first and n_merges > first:
        stage1 = Encoding(f"{name}-stage1", {t: i for i, t in enumerate(tokens)}, None, {})
        pieces = counts.pop(0)
        trainer = Trainer(tokens, min_frequency)
        trainer.add_token_words(
            (stage1._core.encode(piece.decode("utf-8")), pieces[piece]) for piece in sorted(pieces)
        )
        del pieces, stage1
        more = trainer.train(n_merges - first, progress=(lambda k: bar(first + k)) if bar else None)
        merges += more
        report.stages += [2] * len(more)
        tokens = trainer.token_bytes()
        del trainer
        report.encode_pattern = SUPERBPE_PATTERN
    if bar:
        bar.close(len(merges))
    report.merge_seconds = time.perf_counter() - t1
    report.merges = [(tokens[a], tokens[b]) for a, b in merges]
    del merges  # 2 ints per merge: gone before the Vocab is built, the peak of train()

    ranks = {t: i for i, t in enumerate(tokens)}
    if isinstance(special_tokens, dict):
        special_ids = dict(special_tokens)
    else:
        special_ids = {s: len(ranks) + i for i, s in enumerate(specials)}
    enc = Encoding(name, ranks, report.encode_pattern, special_ids)
    enc.training = report
    return enc


# ----------------------------------------------------------------------------- CLI
SNIFF_BYTES = 1 << 20  # the CLI checks this much of each file is text before training on it


def check_text_file(path: str, prog: str = "bpecore train") -> None:
    """Raise ``CLIError`` unless ``path`` can be opened and its first ``SNIFF_BYTES`` (decompressed,
    for gzip) are UTF-8 text without NUL bytes: a missing, unreadable or binary file is refused
    before any work starts."""
    try:
        with _open(path) as f:
            head = f.read(SNIFF_BYTES)
            at_end = len(head) < SNIFF_BYTES
    except (OSError, EOFError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise CLIError(f"{prog}: {path}: {reason}", EXIT_INPUT) from None
    nul = head.find(b"\0")
    if nul >= 0:
        raise CLIError(
            f"{prog}: {path}: binary data (a NUL byte at offset {nul}); give UTF-8 text files",
            EXIT_INPUT,
        )
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=at_end)
    except UnicodeDecodeError as e:
        raise CLIError(
            f"{prog}: {path}: not UTF-8 text (byte {e.start}: {e.reason}); give UTF-8 text files",
            EXIT_INPUT,
        ) from None


def _holdout_split(paths: list[str], holdout_bytes: int) -> tuple[list, str]:
    """Train on all but the last ``holdout_bytes`` of the last file; return (sources, held-out text)."""
    if holdout_bytes <= 0 or not paths:
        return list(paths), ""
    last = paths[-1]
    size = input_size(last)
    take = min(holdout_bytes, size // 10)
    if take <= 0:
        return list(paths), ""
    with _open(last) as f:
        skip = size - take
        while skip > 0:
            skip -= len(f.read(min(skip, CHUNK_BYTES)) or b"\0" * skip)
        held = f.read().decode("utf-8", "replace")
    return list(paths[:-1]) + [FileSlice(str(last), size - take)], held


def _transition(value: str) -> int | str:
    return value if value == "auto" else int(value)


def main(argv: list[str] | None = None) -> int:
    """``bpecore train FILES... --vocab-size N --pattern o200k -o OUT/``: train, save, summarise.

    User errors raise ``bpecore.cli.CLIError`` (one line, an exit code), checked before training:
    missing, unreadable or binary files, a bad --pattern regex, a --vocab-size too small."""
    from bpecore import export

    ap = argparse.ArgumentParser(
        prog="bpecore train",
        description="Train a byte-level BPE vocabulary. Exit codes: 0 ok, 1 an input file is "
        "missing, unreadable or not UTF-8 text, 2 bad usage, 5 written with fewer ids than "
        "--vocab-size (no pair left at --min-frequency).",
    )
    ap.add_argument("files", nargs="*", help="training text files (UTF-8, plain or .gz)")
    ap.add_argument(
        "--counts",
        action="append",
        default=None,
        metavar="PATH",
        help="train from saved piece counts instead of files (count_pieces(...).save(): "
        ".bpecounts or .parquet files, or a directory of them; repeatable); the pattern and "
        "special tokens are the counts' own",
    )
    ap.add_argument(
        "--vocab-size",
        type=int,
        default=32000,
        help="ids in total: 256 bytes + merges + specials (default 32000)",
    )
    ap.add_argument(
        "--pattern",
        default=None,
        help="o200k, cl100k, r50k or a regex (default o200k; with --counts, theirs)",
    )
    ap.add_argument(
        "--special",
        action="append",
        default=None,
        help="special token (repeatable; default <|endoftext|>)",
    )
    ap.add_argument(
        "--min-frequency",
        type=int,
        default=2,
        help="stop when the best pair occurs fewer times (default 2)",
    )
    ap.add_argument(
        "--workers", type=int, default=None, help="pre-tokenization processes (default: CPU count)"
    )
    ap.add_argument(
        "--superbpe",
        type=_transition,
        default=None,
        metavar="T",
        help="SuperBPE: merges before the superword stage, or 'auto' (80%% of the BPE ids)",
    )
    ap.add_argument("--name", default=None, help="encoding name (default: output directory name)")
    ap.add_argument(
        "--holdout-bytes",
        type=int,
        default=0,
        metavar="N",
        help="hold out the last N bytes of the last file (at most 10%% of it) from training and "
        "report the bytes/token on them (default 0: train on all the input)",
    )
    ap.add_argument(
        "-o",
        "--output",
        required=True,
        help="output directory (NAME.tiktoken, NAME.json, tokenizer.json)",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)

    name = args.name or os.path.basename(os.path.normpath(args.output)) or "trained"
    if bool(args.files) == bool(args.counts):
        raise CLIError("bpecore train: give training files or --counts, not both", EXIT_USAGE)
    counts = None
    if args.counts:
        try:
            counts = PieceCounts.load(args.counts)
        except (OSError, ValueError) as e:
            raise CLIError(f"bpecore train: --counts: {e}", EXIT_INPUT) from None
        if args.special is None:
            args.special = list(counts.special_tokens)
        if args.pattern is None:  # shown by its short name where it has one
            names = [k for k, v in NAMED_PATTERNS.items() if v == counts.pattern]
            args.pattern = min(names, key=len) if names else counts.pattern
    specials = args.special if args.special is not None else ["<|endoftext|>"]
    need = 256 + len(specials)
    if args.vocab_size < need:
        raise CLIError(
            f"bpecore train: --vocab-size {args.vocab_size} is too small: the 256 byte tokens "
            f"and {len(specials)} special token(s) need {need}",
            EXIT_USAGE,
        )
    if args.holdout_bytes < 0 or args.min_frequency < 1:
        raise CLIError(
            "bpecore train: --holdout-bytes must be >= 0 and --min-frequency >= 1", EXIT_USAGE
        )
    if args.pattern is None:
        args.pattern = "o200k"
    pattern = resolve_pattern(args.pattern)
    try:
        regex.compile(pattern)
    except regex.error as e:
        raise CLIError(
            f"bpecore train: --pattern {args.pattern!r} is not a valid regex: {e}", EXIT_USAGE
        ) from None
    for path in args.files:
        check_text_file(path, "bpecore train")
    sources, held = _holdout_split(args.files, args.holdout_bytes)
    start = time.perf_counter()
    try:
        enc = train(
            sources or None,
            vocab_size=args.vocab_size,
            pattern=args.pattern,
            special_tokens=specials,
            min_frequency=args.min_frequency,
            workers=args.workers,
            superbpe_transition=args.superbpe,
            name=name,
            progress=not args.quiet,
            counts=counts,
        )
    except ValueError as e:
        if counts is None:
            raise
        raise CLIError(f"bpecore train: --counts: {e}", EXIT_USAGE) from None
    elapsed = time.perf_counter() - start
    try:
        os.makedirs(args.output, exist_ok=True)
        rank_path = export.save_tiktoken(enc, os.path.join(args.output, f"{name}.tiktoken"))
        hf_path = export.save_hf(enc, os.path.join(args.output, "tokenizer.json"))
    except OSError as e:
        raise CLIError(
            f"bpecore train: cannot write to {args.output}: {e.strerror or e}", EXIT_INPUT
        ) from None
    r = enc.training
    print(
        f"trained {name}: {len(r.merges)} merges, {enc.n_vocab} ids, pattern {'superbpe' if r.stages and r.stages[-1] == 2 else args.pattern}"
    )
    print(f"  input {r.input_bytes / 1e6:.1f} MB, {r.unique_pieces} unique pieces")
    print(
        f"  time {elapsed:.2f} s (pre-tokenize {r.pretokenize_seconds:.2f} s, merges {r.merge_seconds:.2f} s, "
        f"{len(r.merges) / max(r.merge_seconds, 1e-9):.0f} merges/s)"
    )
    if held:
        n = enc.count(held)
        print(
            f"  held-out {len(held.encode('utf-8')) / 1e3:.0f} KB: {n} tokens, {len(held.encode('utf-8')) / max(n, 1):.3f} bytes/token"
        )
    else:
        print("  held-out: none, trained on all the input (--holdout-bytes N sets some aside)")
    print(
        f"  wrote {rank_path} (+ {os.path.basename(export.sidecar_path(rank_path))}) and {hf_path}"
    )
    if enc.n_vocab < args.vocab_size:
        print(
            f"bpecore train: {enc.n_vocab} ids, not the {args.vocab_size} asked: no pair occurs "
            f"{args.min_frequency}+ times after {len(r.merges)} merges (more input or a lower "
            "--min-frequency gives more); the smaller vocabulary was written",
            file=sys.stderr,
        )
        return EXIT_SHORT_VOCAB
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CLIError as e:
        print(e.message, file=sys.stderr)
        sys.exit(e.code)
