from collections.abc import Sequence

from bpecore.backtrack import BacktrackEncoder

def encode_batch(
    core: BacktrackEncoder, texts: Sequence[str], num_threads: int, count_only: bool = False
) -> list: ...
def count_text(core: BacktrackEncoder, text: str, num_threads: int, segment: int = ...) -> int: ...
