"""A column of documents on Dask, Spark or Ray: token counts and chunks per batch of rows.

``count_tokens(batch, encoding)`` and ``chunk_documents(batch, encoding, max_tokens)`` take what
an engine hands a function: a pandas ``DataFrame`` (Dask ``map_partitions``, Spark
``mapInPandas``, Ray ``map_batches(batch_format="pandas")``), a pandas ``Series`` (a Spark pandas
UDF), a dict of column arrays (Ray's default batch format) or a list of strings (a Dask bag
partition), and answer in the same kind. The encoding goes to the workers as its name (a shipped
``Encoding`` pickles as its name too) and is loaded once per worker process by the registry.
Recipes for each engine: README, "Training past one machine". No engine is imported here.

A missing text (None or NaN) counts 0 tokens and has no chunks.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from bpecore.chunker import chunk_batch
from bpecore.encoding import Encoding

#: The columns ``chunk_documents`` returns, in order (``doc`` is renamed to ``id_column``).
CHUNK_COLUMNS = ("doc", "chunk", "start", "end", "text", "tokens")


def _encoding(encoding: str | Encoding) -> Encoding:
    if isinstance(encoding, str):
        from bpecore.registry import get_encoding

        return get_encoding(encoding)
    return encoding


def _texts(values: Iterable[Any]) -> list[str]:
    return [v if isinstance(v, str) else "" for v in values]


def _pandas():
    return sys.modules.get("pandas")  # a pandas batch means pandas is imported


def count_tokens(
    batch,
    encoding: str | Encoding = "o200k_base",
    column: str = "text",
    output: str = "tokens",
    *,
    num_threads: int = 1,
):
    """Token counts of a batch of documents (``encode_ordinary`` lengths: special-token text is
    counted as ordinary text).

    Args:
        batch: a pandas DataFrame (the counts are added as column ``output``), a pandas Series
            (returns a Series of counts, same index), a dict of column arrays (returns the dict
            with ``output`` added, an int64 array if ``column`` is a numpy array) or an iterable
            of ``str`` (returns a list of ints).
        encoding: an encoding name (sent to workers as is) or an ``Encoding``.
        column: the text column of a DataFrame or dict batch.
        output: the column the counts go to.
        num_threads: threads per call (engines already run one task per core: 1).

    >>> count_tokens(["hello world", None, "hi"], "cl100k_base")
    [2, 0, 1]
    """
    enc = _encoding(encoding)
    pd = _pandas()
    if pd is not None and isinstance(batch, pd.DataFrame):
        counts = enc.count_batch(_texts(batch[column]), num_threads=num_threads)
        return batch.assign(**{output: pd.Series(counts, index=batch.index, dtype="int64")})
    if pd is not None and isinstance(batch, pd.Series):
        counts = enc.count_batch(_texts(batch), num_threads=num_threads)
        return pd.Series(counts, index=batch.index, dtype="int64", name=output)
    if isinstance(batch, dict):
        values = batch[column]
        counts = enc.count_batch(_texts(values), num_threads=num_threads)
        out = dict(batch)
        if type(values).__module__ == "numpy":
            import numpy as np

            out[output] = np.asarray(counts, dtype=np.int64)
        else:
            out[output] = counts
        return out
    return enc.count_batch(_texts(batch), num_threads=num_threads)


def chunk_documents(
    batch,
    encoding: str | Encoding = "o200k_base",
    max_tokens: int = 512,
    overlap: int = 0,
    column: str = "text",
    id_column: str | None = None,
    *,
    trim: bool = True,
    markdown: bool = False,
    num_threads: int = 1,
):
    """The chunks of a batch of documents (``bpecore.chunk`` on each), one row per chunk.

    Each row holds ``CHUNK_COLUMNS``: the document's id (the value of ``id_column``, else the
    DataFrame index label, else the position in the batch), the chunk's number in its document,
    its character offsets, its text and its token count (always ``<= max_tokens``).

    Args:
        batch: a pandas DataFrame (returns a DataFrame), a dict of column arrays (returns a dict
            of lists) or an iterable of ``str`` (returns a list of row dicts).
        encoding, max_tokens, overlap, trim, markdown: as ``bpecore.chunk``.
        column: the text column; id_column: the column naming each document (its name is the
            id column's name in the result; ``"doc"`` without one).

    >>> chunk_documents(["One. Two three.\\n\\nFour five six."], "cl100k_base", max_tokens=6)[1]
    {'doc': 0, 'chunk': 1, 'start': 17, 'end': 31, 'text': 'Four five six.', 'tokens': 4}
    """
    pd = _pandas()
    is_frame = pd is not None and isinstance(batch, pd.DataFrame)
    if is_frame:
        texts = _texts(batch[column])
        ids = list(batch[id_column]) if id_column else list(batch.index)
    elif isinstance(batch, dict):
        texts = _texts(batch[column])
        ids = list(batch[id_column]) if id_column else list(range(len(texts)))
    else:
        texts = _texts(batch)
        ids = list(range(len(texts)))
    per_doc = chunk_batch(
        texts,
        _encoding(encoding),
        max_tokens,
        overlap,
        trim,
        markdown,
        num_threads=num_threads,
    )
    name = id_column or "doc"
    cols: dict[str, list] = {c: [] for c in (name, *CHUNK_COLUMNS[1:])}
    for doc_id, chunks in zip(ids, per_doc):
        for k, c in enumerate(chunks):
            cols[name].append(doc_id)
            cols["chunk"].append(k)
            cols["start"].append(c.start)
            cols["end"].append(c.end)
            cols["text"].append(c.text)
            cols["tokens"].append(c.tokens)
    if is_frame:
        id_dtype = batch[id_column].dtype if id_column else batch.index.dtype
        types = {name: id_dtype, "chunk": "int64", "start": "int64", "end": "int64"}
        types["text"] = batch[column].dtype
        return pd.DataFrame(cols).astype({**types, "tokens": "int64"})
    if isinstance(batch, dict):
        return cols
    keys = list(cols)
    return [dict(zip(keys, row)) for row in zip(*cols.values())]
