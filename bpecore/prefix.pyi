from bpecore.backtrack import BacktrackEncoder
from bpecore.vocab import Vocab

KIND_REGEX: int

class SuffixTrie:
    vocab: Vocab
    def __init__(self, vocab: Vocab) -> None: ...

def split_at_end(encoder: BacktrackEncoder, text: str, limit: int) -> int: ...
