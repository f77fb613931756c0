"""Write ``bpecore/data/<rank file>.steps``: the shipped split steps of a shipped rank file.

``Vocab.from_tiktoken`` searches every token's split from the rank file (~50 ms for o200k); a
steps file lets the shipped encodings skip that search. The registry uses it only when its
header names the rank file's SHA-256 and the steps' own SHA-256 (``registry._split_steps``), so
a stale file is ignored, never trusted. Run after changing a rank file or the split rule:

    python scripts/write_split_steps.py [rank file ...] [--directory DIR]

(default: cl100k_base.tiktoken and o200k_base.tiktoken, written into bpecore/data).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import zlib
from importlib import resources

from bpecore.load import read_file
from bpecore.registry import _STEPS_MAGIC
from bpecore.vocab import Vocab

SHIPPED = ["cl100k_base.tiktoken", "o200k_base.tiktoken"]


def write_split_steps(filename: str, directory: str | os.PathLike | None = None) -> str:
    """Write ``<filename>.steps`` for a shipped rank file from a fresh build; return its path."""
    data = read_file(str(resources.files("bpecore").joinpath(f"data/{filename}.gz")))
    steps = Vocab.from_tiktoken(data).split_steps()
    blob = b"%s %s %s\n" % (
        _STEPS_MAGIC,
        hashlib.sha256(data).hexdigest().encode(),
        hashlib.sha256(steps).hexdigest().encode(),
    ) + zlib.compress(steps, 9)
    path = os.path.join(
        directory or str(resources.files("bpecore").joinpath("data")), f"{filename}.steps"
    )
    with open(path, "wb") as f:
        f.write(blob)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "files",
        nargs="*",
        default=SHIPPED,
        help="shipped rank files (names in bpecore/data, without .gz)",
    )
    parser.add_argument("--directory", help="write here instead of bpecore/data")
    args = parser.parse_args()
    for name in args.files:
        print(write_split_steps(name, args.directory))


if __name__ == "__main__":
    main()
