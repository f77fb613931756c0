"""Piece counts as a map step: count_pieces over any partition adds up to the counts of the whole,
PieceCounts survive pickling and both file formats, and train(counts=...) gives the merges
train(files) gives (SuperBPE included)."""

from __future__ import annotations

import gzip
import pickle
import random
import subprocess
import sys

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore import PieceCounts, count_pieces, train
from bpecore import training as train_module
from bpecore._exitcodes import CLIError
from bpecore.training import SUPERBPE_PATTERN, FileSlice, file_shards, split_text

MIXED = ["english", "code", "multilingual"]
CUT = regex.compile(r"\n(?=\p{L})")
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def texts(corpus):
    """~120 KB of each mixed corpus, an end-of-text token inside each (a document boundary)."""
    out = []
    for n in MIXED:
        t = corpus(n)[:120_000]
        out.append(t[:60_000] + EOT + t[60_000:])
    return out


@pytest.fixture(scope="module")
def files(texts, tmp_path_factory):
    d = tmp_path_factory.mktemp("counts")
    paths = []
    for n, t in zip(MIXED, texts):
        p = d / f"{n}.txt"
        p.write_text(t, encoding="utf-8")
        paths.append(str(p))
    gz = d / "english.txt.gz"
    gz.write_bytes(gzip.compress(texts[0].encode("utf-8")))
    return paths, str(gz)


@pytest.fixture(scope="module")
def whole(files):
    paths, _ = files
    return count_pieces(paths, special_tokens=[EOT], superbpe=True)


# ------------------------------------------------------------------ the table and its sums
def test_counts_are_the_encoders_pieces(texts):
    pattern = bpecore.get_encoding("o200k_base").pattern
    expected: dict[bytes, int] = {}
    for doc in texts[0].split(EOT):
        for piece in regex.findall(pattern, doc):
            expected[piece.encode()] = expected.get(piece.encode(), 0) + 1
    c = count_pieces(texts[:1], special_tokens=[EOT])
    assert c.pieces == expected and c.special_tokens == (EOT,)
    assert c.total == sum(expected.values()) and len(c) == len(expected)
    assert c.input_bytes == len(texts[0])  # str input: characters, as train(texts) reports
    # without the special token, its text is cut into pieces like any text
    assert any(b"<|" in p for p in count_pieces(texts[:1], pattern="o200k_base").pieces)


def test_add_and_sum(texts):
    parts = [count_pieces([t]) for t in texts]
    total = count_pieces(texts)
    assert sum(parts) == total == parts[0] + parts[1] + parts[2]
    before = [p.copy() for p in parts]
    _ = parts[0] + parts[1], parts[2] + parts[0], sum(parts)
    assert parts == before, "a + b must change neither"
    acc = parts[0].copy()
    acc += parts[1]
    acc += parts[2]
    assert acc == total and acc.input_bytes == sum(p.input_bytes for p in parts)
    with pytest.raises(ValueError, match="pattern"):
        parts[0] + count_pieces([texts[0]], pattern="cl100k")
    with pytest.raises(ValueError, match="special_tokens"):
        parts[0] + count_pieces([texts[0]], special_tokens=[EOT])
    with pytest.raises(ValueError, match="superword_pattern"):
        parts[0] + count_pieces([texts[0]], superbpe=True)
    with pytest.raises(TypeError):
        parts[0] + 1


def test_pickle_is_compact_and_exact(whole):
    data = pickle.dumps(whole)
    assert pickle.loads(data) == whole
    assert len(data) < len(pickle.dumps((whole.pieces, whole.superwords))) / 2
    assert len(data) < whole.input_bytes


def test_binary_format(whole, tmp_path):
    path = whole.save(tmp_path / "a.bpecounts")
    again = PieceCounts.load(path)
    assert again == whole and again.superword_pattern == SUPERBPE_PATTERN
    data = (tmp_path / "a.bpecounts").read_bytes()
    assert data.startswith(b"BPECNT1\n") and data == whole.to_bytes()
    with pytest.raises(ValueError, match="magic"):
        PieceCounts.from_bytes(b"PK" + data[2:])


def test_parquet_format_and_directories(texts, whole, tmp_path):
    pytest.importorskip("pyarrow")
    parts = [count_pieces([t], special_tokens=[EOT], superbpe=True) for t in texts]
    parts[0].save(tmp_path / "0.parquet")
    parts[1].save(tmp_path / "1.bpecounts")
    parts[2].save(tmp_path / "2.parquet")
    assert PieceCounts.load(tmp_path / "0.parquet") == parts[0]
    assert PieceCounts.load(tmp_path) == sum(parts)  # a directory of shards, both formats
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "2.parquet")
    assert table.column_names == ["table", "piece", "count"]
    assert table.num_rows == len(parts[2].pieces) + len(parts[2].superwords)


# ------------------------------------------------------------------ partitions add up
def test_split_text_cuts_at_cut_points(texts):
    text = texts[1]
    for size in (1, 100, 997, 20_000):
        parts = split_text(text, size)
        assert "".join(parts) == text
        ends = [sum(map(len, parts[: i + 1])) for i in range(len(parts) - 1)]
        assert all(regex.match(r"\p{L}", text[e]) and text[e - 1] == "\n" for e in ends)
        cuts = [m.end() for m in CUT.finditer(text)]
        assert set(ends) <= set(cuts)
        for start, part in zip([0, *ends], parts):  # longer only where no cut point falls within
            if len(part) > size:
                assert not [c for c in cuts if start < c <= start + size]
        assert sum(len(p) > size for p in parts) < len(parts) / 2 or size < 100


def test_file_shards_cover_the_file_at_cut_points(files):
    paths, gz = files
    for path in (paths[2], gz):
        shards = file_shards(path, 10_000)
        assert shards[0].start == 0 and shards[-1].end == train_module.input_size(path)
        assert all(a.end == b.start for a, b in zip(shards, shards[1:])) and len(shards) > 5
        data = train_module._open(path).read()
        for s in shards[1:]:
            assert data[s.start - 1 : s.start] == b"\n"
            assert regex.match(r"\p{L}", data[s.start : s.start + 4].decode("utf-8", "ignore"))


@pytest.mark.parametrize("shard_bytes", [7_000, 50_000, 10**9])
def test_shards_of_files_add_up(files, whole, shard_bytes):
    paths, gz = files
    shards = [s for p in paths for s in file_shards(p, shard_bytes)]
    assert sum(count_pieces(s, special_tokens=[EOT], superbpe=True) for s in shards) == whole
    gz_shards = file_shards(gz, shard_bytes)
    one = count_pieces(paths[0], special_tokens=[EOT], superbpe=True)
    assert sum(count_pieces(s, special_tokens=[EOT], superbpe=True) for s in gz_shards) == one


@pytest.mark.parametrize("n_parts", [1, 2, 7, 40])
def test_text_partitions_add_up(texts, whole, n_parts):
    # split_text's parts dealt at random to n partitions, each counted apart
    rng = random.Random(n_parts)
    parts = [p for t in texts for p in split_text(t, rng.randint(500, 30_000))]
    buckets: list[list[str]] = [[] for _ in range(n_parts)]
    for p in parts:
        buckets[rng.randrange(n_parts)].append(p)
    counted = sum(count_pieces(b, special_tokens=[EOT], superbpe=True) for b in buckets)
    assert counted.pieces == whole.pieces and counted.superwords == whole.superwords


DOC_ALPHABET = st.sampled_from(list("ab c\n.0'\t") + ["é", "中", "  ", "the", " the", "\nThe"])


@given(st.lists(DOC_ALPHABET, max_size=80).map("".join), st.lists(st.integers(0, 80)))
def test_hyp_any_cut_point_partition_adds_up(text, picks):
    cuts = [m.end() for m in CUT.finditer(text)]
    chosen = sorted({cuts[i % len(cuts)] for i in picks}) if cuts else []
    bounds = [0, *chosen, len(text)]
    parts = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert count_pieces(parts, superbpe=True) == count_pieces([text], superbpe=True)
    apart = sum(count_pieces([p], pattern="cl100k") for p in parts)
    assert apart.pieces == count_pieces([text], pattern="cl100k").pieces


# ------------------------------------------------------------------ training from counts
@pytest.mark.parametrize("superbpe", [None, 600])
def test_train_from_counts_equals_train_from_files(files, whole, superbpe, tmp_path):
    paths, _ = files
    kw = dict(vocab_size=1200, special_tokens=[EOT], superbpe_transition=superbpe)
    expected = train(paths, workers=1, **kw)
    shards = [s for p in paths for s in file_shards(p, 20_000)]
    parts = [count_pieces(s, special_tokens=[EOT], superbpe=True) for s in shards]
    for i, part in enumerate(parts):
        part.save(tmp_path / f"shard-{i:03d}.bpecounts")
    for counts in (whole, sum(parts), parts, tmp_path, [str(p) for p in tmp_path.iterdir()]):
        enc = train(counts=counts, **kw)
        assert enc.training.merges == expected.training.merges
        assert enc.mergeable_ranks == expected.mergeable_ranks
        assert enc.special_tokens == expected.special_tokens and enc.pattern == expected.pattern
        assert enc.training.input_bytes == expected.training.input_bytes
        assert enc.training.unique_pieces == expected.training.unique_pieces
    if superbpe:
        assert enc.training.stages.count(2) > 0 and enc.pattern == SUPERBPE_PATTERN


def test_train_from_counts_of_documents(texts):
    # document boundaries: every document counted on its own, in any grouping
    docs = [d for t in texts for d in t.split(EOT)]
    expected = train(docs, vocab_size=900, pattern="cl100k", workers=1, superbpe_transition=500)
    counts = [count_pieces([d], pattern="cl100k", superbpe=True) for d in docs]
    enc = train(counts=counts[::-1], vocab_size=900, superbpe_transition=500)
    assert enc.training.merges == expected.training.merges
    assert enc.training.stages == expected.training.stages


def test_train_from_counts_refuses_what_was_not_counted(texts):
    c = count_pieces(texts[:1], special_tokens=[EOT])
    with pytest.raises(ValueError, match="pattern"):
        train(counts=c, vocab_size=300, pattern="cl100k")
    with pytest.raises(ValueError, match="special tokens"):
        train(counts=c, vocab_size=300, special_tokens=["<|pad|>"])
    with pytest.raises(ValueError, match="superbpe=True"):
        train(counts=c, vocab_size=300, superbpe_transition=10)
    with pytest.raises(TypeError):
        train(texts[:1], counts=c, vocab_size=300)
    with pytest.raises(TypeError):
        train(vocab_size=300)
    # the defaults are the counts' own: their pattern, their specials after the BPE ids
    enc = train(counts=c, vocab_size=300)
    assert enc.pattern == bpecore.get_encoding("o200k_base").pattern
    assert enc.special_tokens == {EOT: 299}
    assert train(counts=c, vocab_size=300, pattern="o200k").training.merges == enc.training.merges
    assert train(counts=c, vocab_size=300, special_tokens={EOT: 5000}).special_tokens == {EOT: 5000}


def test_file_slice_reads_its_range(files):
    paths, _ = files
    data = open(paths[2], "rb").read()  # multilingual: offsets may fall inside a character
    for a, b in [(0, 1), (1000, 5000), (20_001, 64_999), (70_000, 70_000)]:
        c = count_pieces(FileSlice(paths[2], b, a))
        assert c.pieces == count_pieces([data[a:b].decode("utf-8", "replace")]).pieces
        assert c.input_bytes == b - a


def test_import_bpecore_imports_no_engine():
    code = (
        "import sys, bpecore, bpecore.corpus, bpecore.counts; "
        "print([m for m in ('dask', 'distributed', 'ray', 'pyspark', 'pyarrow', 'pandas') "
        "if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_worker_processes_read_plain_files_in_slices(files, whole, monkeypatch):
    # workers=2: plain files go to the workers as FileSlice ranges they read themselves (4 x
    # CHUNK_BYTES, here 20 KB, cut at cut points); gzip files are read here and sent as text
    paths, gz = files
    monkeypatch.setattr(train_module, "CHUNK_BYTES", 5000)
    tasks = list(train_module._worker_tasks(paths, None))
    assert all(isinstance(t, FileSlice) for t, _ in tasks) and len(tasks) > 15
    assert sum(n for _, n in tasks) == whole.input_bytes
    assert count_pieces(paths, special_tokens=[EOT], superbpe=True, workers=2) == whole
    mixed = [paths[1], gz, FileSlice(paths[2], 90_000, 0)]
    one = count_pieces(mixed, special_tokens=[EOT], superbpe=True, workers=1)
    assert count_pieces(mixed, special_tokens=[EOT], superbpe=True, workers=2) == one
    assert any(isinstance(t, list) for t, _ in train_module._worker_tasks(mixed, None))


def test_cli_trains_from_saved_counts(files, tmp_path, capsys):
    paths, _ = files
    shards = tmp_path / "shards"
    shards.mkdir()
    for i, s in enumerate(s for p in paths for s in file_shards(p, 30_000)):
        count_pieces(s, "cl100k", [EOT], superbpe=True).save(shards / f"{i:03d}.bpecounts")
    args = ["--vocab-size", "700", "--superbpe", "400", "--quiet"]
    assert train_module.main([*paths, "--pattern", "cl100k", *args, "-o", str(tmp_path / "a")]) == 0
    assert train_module.main(["--counts", str(shards), *args, "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "pattern superbpe" in out
    a = bpecore.registry.load_saved(tmp_path / "a" / "a.tiktoken")
    b = bpecore.registry.load_saved(tmp_path / "b" / "b.tiktoken")
    assert a.mergeable_ranks == b.mergeable_ranks and a.special_tokens == b.special_tokens
    assert a.pattern == b.pattern == SUPERBPE_PATTERN
    assert train_module.main(["--counts", str(shards), *args[:2], "-o", str(tmp_path / "c")]) == 0
    assert "pattern cl100k" in capsys.readouterr().out
    errors = [
        ([], "files or --counts"),
        ([*paths, "--counts", str(shards)], "files or --counts"),
        (["--counts", str(shards), "--pattern", "o200k"], "pattern"),
        (["--counts", str(tmp_path / "missing.bpecounts")], "--counts"),
    ]
    for argv, message in errors:
        with pytest.raises(CLIError, match=message):
            train_module.main([*argv, "--vocab-size", "700", "--quiet", "-o", str(tmp_path / "x")])
