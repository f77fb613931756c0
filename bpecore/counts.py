"""Piece counts, the map output of training: ``PieceCounts``, its sum and its two file formats.

``bpecore.count_pieces(texts or files, pattern, special_tokens)`` (in ``bpecore.training``) makes
one; ``bpecore.train(counts=...)`` merges from them (README, "Training past one machine"). A
``PieceCounts`` is the exact pieces the pre-tokenizer cuts, each with its number of occurrences,
plus what was counted (pattern, the special-token strings that delimited documents, the SuperBPE
stage-2 pattern if its pieces were counted too) and how many input bytes they stand for. Counts of
disjoint parts of a corpus add up (``a + b``, ``sum(parts)``) to the counts of the whole, whatever
the parts, as long as every part ends at a document boundary or at a cut point of the training
rule (after a newline followed by a letter).

Binary format (``.bpecounts``, the default of ``save``), little-endian::

    b"BPECNT1\\n"                      8-byte magic
    uint32 H, then H bytes of JSON     {"pattern", "special_tokens", "superword_pattern",
                                        "input_bytes", "tables": [{"name", "n", "bytes"}, ...]}
    zlib stream                        for each table in order: n uint32 piece lengths,
                                        n uint64 counts, then the pieces' bytes concatenated

Tables are ``"pieces"`` (the pattern's) and, when SuperBPE pieces were counted, ``"superwords"``;
pieces are sorted by their bytes, so equal counts give identical files. Parquet (``.parquet``,
needs ``pyarrow``): columns ``table`` (string), ``piece`` (binary), ``count`` (uint64), the JSON
header without ``tables`` in the schema metadata under ``bpecore.counts``.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator
from sys import byteorder

MAGIC = b"BPECNT1\n"
PARQUET_KEY = b"bpecore.counts"
_PARQUET_MAGIC = b"PAR1"


class PieceCounts:
    """Counted pre-tokenized pieces: what ``train`` needs of a corpus, without the corpus.

    Fields:
    - ``pattern``: the pre-tokenizer regex the pieces were cut with (None: one piece per document).
    - ``special_tokens``: the special-token strings that delimited documents (sorted tuple).
    - ``pieces``: piece bytes -> occurrences.
    - ``superword_pattern``/``superwords``: for SuperBPE, the stage-2 pattern and its pieces'
      counts over the same text (None when not counted).
    - ``input_bytes``: input bytes the counts stand for (characters for ``str`` input, as
      ``train``'s report counts them).

    >>> from bpecore import count_pieces
    >>> a = count_pieces(["low lower"], pattern="o200k")
    >>> b = count_pieces(["lowest low"], pattern="o200k")
    >>> sorted((a + b).pieces.items())
    [(b' low', 1), (b' lower', 1), (b'low', 1), (b'lowest', 1)]
    >>> sum([a, b]) == a + b
    True
    """

    __slots__ = (
        "pattern",
        "special_tokens",
        "pieces",
        "superword_pattern",
        "superwords",
        "input_bytes",
    )

    def __init__(
        self,
        pattern: str | None,
        special_tokens: Iterable[str] = (),
        pieces: dict[bytes, int] | None = None,
        superword_pattern: str | None = None,
        superwords: dict[bytes, int] | None = None,
        input_bytes: int = 0,
    ):
        if superwords is not None and superword_pattern is None:
            raise ValueError("superwords need their superword_pattern")
        self.pattern = pattern
        self.special_tokens = tuple(sorted(set(special_tokens)))
        self.pieces = {} if pieces is None else pieces
        self.superword_pattern = superword_pattern
        self.superwords = (
            superwords if superwords is not None else ({} if superword_pattern else None)
        )
        self.input_bytes = int(input_bytes)

    # ------------------------------------------------------------------ sums
    def _header(self) -> dict:
        return {
            "pattern": self.pattern,
            "special_tokens": list(self.special_tokens),
            "superword_pattern": self.superword_pattern,
            "input_bytes": self.input_bytes,
        }

    @classmethod
    def _from_header(cls, header: dict) -> PieceCounts:
        """Empty counts with the settings ``_header`` wrote (both file formats carry it)."""
        return cls(
            header["pattern"],
            header["special_tokens"],
            None,
            header["superword_pattern"],
            None,
            header["input_bytes"],
        )

    def _check_same(self, other: PieceCounts) -> None:
        for what in ("pattern", "special_tokens", "superword_pattern"):
            if getattr(self, what) != getattr(other, what):
                raise ValueError(
                    f"cannot add piece counts made with different {what}: "
                    f"{getattr(self, what)!r} and {getattr(other, what)!r}"
                )

    def copy(self) -> PieceCounts:
        """A copy with its own tables."""
        return PieceCounts(
            self.pattern,
            self.special_tokens,
            dict(self.pieces),
            self.superword_pattern,
            None if self.superwords is None else dict(self.superwords),
            self.input_bytes,
        )

    def __iadd__(self, other: PieceCounts) -> PieceCounts:
        """Add ``other`` into this one (``other`` is left as it is)."""
        if not isinstance(other, PieceCounts):
            return NotImplemented
        self._check_same(other)
        _add_into(self.pieces, other.pieces)
        if self.superwords is not None:
            _add_into(self.superwords, other.superwords)
        self.input_bytes += other.input_bytes
        return self

    def __add__(self, other: PieceCounts) -> PieceCounts:
        """A new sum: a copy of the larger table with the smaller one added into it. (``sum`` of
        many parts copies the running total at each step; ``+=`` in a loop does not.)"""
        if not isinstance(other, PieceCounts):
            return NotImplemented
        self._check_same(other)
        big, small = (self, other) if len(self.pieces) >= len(other.pieces) else (other, self)
        out = big.copy()
        out += small
        return out

    def __radd__(self, other) -> PieceCounts:
        if isinstance(other, int) and other == 0:  # sum() starts from 0
            return self.copy()
        return NotImplemented

    def __eq__(self, other) -> bool:
        if not isinstance(other, PieceCounts):
            return NotImplemented
        return self._header() == other._header() and (
            self.pieces == other.pieces and self.superwords == other.superwords
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __len__(self) -> int:
        """Number of distinct pieces (of the pattern; superwords not included)."""
        return len(self.pieces)

    @property
    def total(self) -> int:
        """Number of pieces counted (occurrences, not distinct)."""
        return sum(self.pieces.values())

    def __repr__(self) -> str:
        sw = "" if self.superwords is None else f", {len(self.superwords)} superwords"
        return f"<PieceCounts {len(self.pieces)} pieces{sw}, {self.input_bytes} input bytes>"

    # ------------------------------------------------------------------ bytes and files
    def to_bytes(self, level: int = 1) -> bytes:
        """The binary format (module docstring); ``level`` is zlib's (1: fast, 9: smallest)."""
        header = self._header()
        tables = []
        comp = zlib.compressobj(level)
        body = []
        for name, table in self._tables():
            keys = sorted(table)
            lengths = array("I", map(len, keys))
            counts = array("Q", map(table.__getitem__, keys))
            if byteorder != "little":
                lengths.byteswap()
                counts.byteswap()
            blob = b"".join(keys)
            tables.append({"name": name, "n": len(keys), "bytes": len(blob)})
            body += [comp.compress(lengths), comp.compress(counts), comp.compress(blob)]
        body.append(comp.flush())
        header["tables"] = tables
        head = json.dumps(header, ensure_ascii=False).encode("utf-8")
        return b"".join([MAGIC, struct.pack("<I", len(head)), head, *body])

    @classmethod
    def from_bytes(cls, data: bytes) -> PieceCounts:
        """Read the binary format written by ``to_bytes``."""
        if data[:8] != MAGIC:
            raise ValueError("not bpecore piece counts (bad magic)")
        (h,) = struct.unpack_from("<I", data, 8)
        header = json.loads(data[12 : 12 + h].decode("utf-8"))
        body = zlib.decompress(data[12 + h :])
        out = cls._from_header(header)
        pos = 0
        for t in header["tables"]:
            n = t["n"]
            lengths = array("I")
            lengths.frombytes(body[pos : pos + 4 * n])
            pos += 4 * n
            counts = array("Q")
            counts.frombytes(body[pos : pos + 8 * n])
            pos += 8 * n
            if byteorder != "little":
                lengths.byteswap()
                counts.byteswap()
            blob = body[pos : pos + t["bytes"]]
            pos += t["bytes"]
            table = dict(zip(_split(blob, lengths), counts))
            if t["name"] == "pieces":
                out.pieces = table
            elif t["name"] == "superwords":
                out.superwords = table
            else:
                raise ValueError(f"unknown table {t['name']!r} in piece counts")
        if pos != len(body):
            raise ValueError("piece counts: trailing or missing bytes")
        return out

    def __reduce__(self):
        # pickled in the compact binary form: what a cluster sends from the workers to the reducer
        return (PieceCounts.from_bytes, (self.to_bytes(),))

    def _tables(self) -> Iterator[tuple[str, dict[bytes, int]]]:
        yield "pieces", self.pieces
        if self.superwords is not None:
            yield "superwords", self.superwords

    def save(self, path: str | os.PathLike, format: str | None = None) -> str:
        """Write to ``path``: Parquet when it ends with ``.parquet`` (or ``format="parquet"``),
        else the binary format. Returns the path."""
        path = os.fspath(path)
        if (format or ("parquet" if path.endswith(".parquet") else "binary")) == "parquet":
            _save_parquet(self, path)
        else:
            with open(path, "wb") as f:
                f.write(self.to_bytes())
        return path

    @classmethod
    def load(cls, paths: str | os.PathLike | Iterable[str | os.PathLike]) -> PieceCounts:
        """Read one saved file, or the sum of several (a list, or a directory's ``*.bpecounts``
        and ``*.parquet`` files): what one node does with the shards a cluster wrote."""
        total: PieceCounts | None = None
        for path in _expand(paths):
            with open(path, "rb") as f:
                magic = f.read(4)
            part = _load_parquet(path) if magic == _PARQUET_MAGIC else cls.from_bytes(_read(path))
            if total is None:
                total = part
            else:
                total += part
        if total is None:
            raise FileNotFoundError(f"no piece-count files in {paths!r}")
        return total


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _expand(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out += sorted(
                os.path.join(p, f) for f in os.listdir(p) if f.endswith((".bpecounts", ".parquet"))
            )
        else:
            out.append(p)
    return out


def _split(blob: bytes, lengths: array) -> Iterator[bytes]:
    pos = 0
    for n in lengths:
        yield blob[pos : pos + n]
        pos += n


def _add_into(a: dict[bytes, int], b: dict[bytes, int]) -> None:
    """Add the counts of ``b`` into ``a``."""
    get = a.get
    for k, v in b.items():
        a[k] = get(k, 0) + v


def _save_parquet(counts: PieceCounts, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names, pieces, values = [], [], []
    for name, table in counts._tables():
        keys = sorted(table)
        names += [name] * len(keys)
        pieces += keys
        values += [table[k] for k in keys]
    schema = pa.schema(
        [
            ("table", pa.dictionary(pa.int8(), pa.string())),
            ("piece", pa.binary()),
            ("count", pa.uint64()),
        ],
        metadata={PARQUET_KEY: json.dumps(counts._header(), ensure_ascii=False).encode("utf-8")},
    )
    data = pa.table(
        [
            pa.array(names).dictionary_encode().cast(schema.field("table").type),
            pa.array(pieces, pa.binary()),
            pa.array(values, pa.uint64()),
        ],
        schema=schema,
    )
    pq.write_table(data, path)


def _load_parquet(path: str) -> PieceCounts:
    import pyarrow.parquet as pq

    data = pq.read_table(path)
    meta = (data.schema.metadata or {}).get(PARQUET_KEY)
    if meta is None:
        raise ValueError(f"{path}: a Parquet file without bpecore piece-count metadata")
    header = json.loads(meta.decode("utf-8"))
    out = PieceCounts._from_header(header)
    names = data.column("table").to_pylist()
    pieces = data.column("piece").to_pylist()
    values = data.column("count").to_pylist()
    for name, piece, n in zip(names, pieces, values):
        if name == "pieces":
            out.pieces[piece] = n
        elif name == "superwords" and out.superwords is not None:
            out.superwords[piece] = n
        else:
            raise ValueError(f"{path}: unknown table {name!r} in piece counts")
    return out
