"""Counting, training and corpus processing on real engines: a dask.distributed LocalCluster of
2 worker processes in the default run; Ray (local) and PySpark (local mode) in the slow suite.
Each runs the README's recipe ("Training past one machine") and must give what one process gives:
the same merges, the same token counts, the same chunks. (No ``from __future__ import
annotations``: Spark reads the pandas UDF's type hints as objects.)"""

import gzip
import operator
import os
import pickle

import pytest

import bpecore
from bpecore import PieceCounts, count_pieces, train
from bpecore.corpus import chunk_documents, count_tokens
from bpecore.training import file_shards

SHARED_CORPORA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "corpora")
NAMES = ["english", "code", "multilingual", "adv_unicode"]
EOT = "<|endoftext|>"
ENCODING = "o200k_base"


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    """The first 512 KiB of each corpus as plain files: the input every engine shards."""
    d = tmp_path_factory.mktemp("corpora")
    paths = []
    for name in NAMES:
        with open(os.path.join(SHARED_CORPORA, f"{name}.1mb.txt.gz"), "rb") as f:
            data = gzip.decompress(f.read())[: 512 * 1024]
        path = d / f"{name}.txt"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def shards(corpus_files):
    out = [s for p in corpus_files for s in file_shards(p, 128 * 1024)]
    assert len(out) >= 12
    return out


@pytest.fixture(scope="module")
def expected(corpus_files):
    """Single-process training on the files: plain BPE and SuperBPE, 3,000 ids."""
    kw = dict(vocab_size=3000, special_tokens=[EOT], workers=1)
    return {
        "bpe": train(corpus_files, **kw),
        "superbpe": train(corpus_files, superbpe_transition=2000, **kw),
    }


@pytest.fixture(scope="module")
def documents(corpus_files):
    """Documents for corpus processing: the paragraphs of the corpora, some empty, one None."""
    docs: list[str | None] = []
    for p in corpus_files:
        with open(p, encoding="utf-8") as f:
            docs += f.read().split("\n\n")[:150]
    docs[7] = None
    docs[8] = ""
    return docs


def _check_trained(counts: PieceCounts, expected) -> None:
    for kind, transition in (("bpe", None), ("superbpe", 2000)):
        enc = train(counts=counts, vocab_size=3000, superbpe_transition=transition)
        assert enc.training.merges == expected[kind].training.merges, kind
        assert enc.training.stages == expected[kind].training.stages, kind
        assert enc.mergeable_ranks == expected[kind].mergeable_ranks, kind


def _check_counts(docs, counts) -> None:
    enc = bpecore.get_encoding(ENCODING)
    assert list(counts) == [enc.count(d) if d else 0 for d in docs]


def _check_chunks(docs, ids, rows, max_tokens) -> None:
    enc = bpecore.get_encoding(ENCODING)
    got: dict[int, list[tuple]] = {}
    for r in rows:
        got.setdefault(r["id"], []).append(
            (r["chunk"], r["start"], r["end"], r["text"], r["tokens"])
        )
    for doc_id, doc in zip(ids, docs):
        want = [
            (k, c.start, c.end, c.text, c.tokens)
            for k, c in enumerate(bpecore.chunk(doc or "", enc, max_tokens))
        ]
        assert sorted(got.get(doc_id, [])) == want, doc_id
        assert all(t <= max_tokens for *_, t in want)
    assert len(rows) > len(docs)


def _count_and_save(shard, path: str) -> str:
    return count_pieces(shard, special_tokens=[EOT], superbpe=True).save(path)


def test_encoding_travels_by_name():
    enc = bpecore.get_encoding(ENCODING)
    assert len(pickle.dumps(enc)) < 200 and pickle.loads(pickle.dumps(enc)) is enc


# ------------------------------------------------------------------ dask.distributed (CI)
@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        yield client


def test_dask_count_reduce_train(dask_client, shards, expected, tmp_path):
    client = dask_client
    # The shards go to the two workers in turn: left to the scheduler, a loaded machine can run
    # them all on the worker that started first.
    addresses = sorted(client.scheduler_info()["workers"])
    futures = [
        client.submit(
            count_pieces,
            shard,
            special_tokens=[EOT],
            superbpe=True,
            workers=[addresses[i % len(addresses)]],
        )
        for i, shard in enumerate(shards)
    ]
    total = client.submit(sum, futures).result()
    workers = {w for ws in client.who_has(futures).values() for w in ws}
    assert len(workers) == 2, "both worker processes counted"
    _check_trained(total, expected)
    # the shards written as files by the workers (both formats), read on this node
    paths = [
        str(tmp_path / f"part-{i:04d}.{'parquet' if i % 2 else 'bpecounts'}")
        for i in range(len(shards))
    ]
    written = client.gather(client.map(_count_and_save, shards, paths))
    assert sorted(written) == sorted(paths)
    assert PieceCounts.load(tmp_path) == total


def test_dask_bag_and_dataframe_corpus(dask_client, documents):
    import dask.bag as db

    bag = db.from_sequence(documents, npartitions=6)
    counts = bag.map_partitions(count_tokens, ENCODING).compute()
    _check_counts(documents, counts)
    # the Encoding object itself is sent by name too
    again = bag.map_partitions(count_tokens, bpecore.get_encoding(ENCODING)).compute()
    assert again == counts

    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame({"id": range(len(documents)), "text": documents})
    ddf = dd.from_pandas(frame, npartitions=5)
    with_counts = ddf.map_partitions(count_tokens, ENCODING).compute()
    _check_counts(documents, with_counts["tokens"])
    chunks = ddf.map_partitions(chunk_documents, ENCODING, 64, id_column="id").compute()
    assert list(chunks.columns) == ["id", "chunk", "start", "end", "text", "tokens"]
    _check_chunks(documents, frame["id"], chunks.to_dict("records"), 64)


# ------------------------------------------------------------------ Ray (local), slow suite
@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_count_reduce_train(ray_local, shards, expected):
    ray = ray_local
    count = ray.remote(count_pieces)
    parts = ray.get([count.remote(s, special_tokens=[EOT], superbpe=True) for s in shards])
    _check_trained(sum(parts), expected)


@pytest.mark.slow
def test_ray_data_corpus(ray_local, documents):
    import ray.data

    rows = [{"id": i, "text": t or ""} for i, t in enumerate(documents)]
    ds = ray.data.from_items(rows, override_num_blocks=4)
    counted = ds.map_batches(count_tokens, fn_kwargs={"encoding": ENCODING}).take_all()
    counted.sort(key=operator.itemgetter("id"))
    _check_counts(documents, [r["tokens"] for r in counted])
    chunks = ds.map_batches(
        chunk_documents,
        fn_kwargs={"encoding": ENCODING, "max_tokens": 64, "id_column": "id"},
        batch_format="pandas",
    ).take_all()
    _check_chunks(documents, range(len(documents)), chunks, 64)


# ------------------------------------------------------------------ PySpark (local mode), slow suite
@pytest.fixture(scope="module")
def spark():
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("bpecore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.mark.slow
def test_spark_count_reduce_train(spark, shards, expected):
    rdd = spark.sparkContext.parallelize(shards, len(shards))
    total = rdd.map(lambda s: count_pieces(s, special_tokens=[EOT], superbpe=True)).treeReduce(
        operator.add
    )
    _check_trained(total, expected)


@pytest.mark.slow
def test_spark_pandas_udf_corpus(spark, documents):
    import pandas as pd
    from pyspark.sql.functions import col, pandas_udf

    @pandas_udf("long")
    def n_tokens(texts: pd.Series) -> pd.Series:
        return count_tokens(texts, ENCODING)

    df = spark.createDataFrame(
        pd.DataFrame({"id": range(len(documents)), "text": documents}), "id long, text string"
    )
    counted = df.select("id", n_tokens(col("text")).alias("tokens")).orderBy("id").collect()
    _check_counts(documents, [r["tokens"] for r in counted])
    schema = "id long, chunk long, start long, end long, text string, tokens long"
    chunks = df.mapInPandas(
        lambda batches: (chunk_documents(b, ENCODING, 64, id_column="id") for b in batches),
        schema,
    ).collect()
    _check_chunks(documents, range(len(documents)), [r.asDict() for r in chunks], 64)
