"""bpecore: exact, fast BPE token counting, splitting and chunking, identical to tiktoken."""

from bpecore.appendable import AppendableCounter as AppendableCounter
from bpecore.appendable import PrependableCounter as PrependableCounter
from bpecore.chat import CHAT_RULES as CHAT_RULES
from bpecore.chat import ChatCount as ChatCount
from bpecore.chat import ChatCounter as ChatCounter
from bpecore.chat import count_messages as count_messages
from bpecore.chat import count_request as count_request
from bpecore.chat import fits as fits
from bpecore.chat import trim_to_budget as trim_to_budget
from bpecore.chunker import Chunk as Chunk
from bpecore.chunker import chunk as chunk
from bpecore.chunker import chunk_batch as chunk_batch
from bpecore.counts import PieceCounts as PieceCounts
from bpecore.encoding import Encoding as Encoding
from bpecore.encoding import UnknownTokenError as UnknownTokenError
from bpecore.gguf import load_gguf as load_gguf
from bpecore.images import image_size as image_size
from bpecore.interval import IntervalCounter as IntervalCounter
from bpecore.llama import load_llama as load_llama
from bpecore.load import VocabError as VocabError
from bpecore.model import encoding_for_model as encoding_for_model
from bpecore.model import encoding_name_for_model as encoding_name_for_model
from bpecore.piececache import cache_info as cache_info
from bpecore.piececache import set_cache_size as set_cache_size
from bpecore.pretrained import from_pretrained as from_pretrained
from bpecore.registry import get_encoding as get_encoding
from bpecore.registry import list_encoding_names as list_encoding_names
from bpecore.registry import list_encodings as list_encodings
from bpecore.registry import load_hf as load_hf
from bpecore.registry import load_tiktoken as load_tiktoken
from bpecore.registry import register_encoding as register_encoding
from bpecore.tekken import load_tekken as load_tekken
from bpecore.training import count_pieces as count_pieces
from bpecore.training import train as train

__version__ = "0.1.0"

__all__ = [
    "AppendableCounter",
    "Chunk",
    "Encoding",
    "IntervalCounter",
    "PrependableCounter",
    "chunk",
    "chunk_batch",
    "count_messages",
    "CHAT_RULES",
    "ChatCount",
    "ChatCounter",
    "count_request",
    "fits",
    "trim_to_budget",
    "image_size",
    "train",
    "count_pieces",
    "PieceCounts",
    "VocabError",
    "get_encoding",
    "list_encodings",
    "load_hf",
    "load_tiktoken",
    "load_tekken",
    "load_llama",
    "from_pretrained",
    "load_gguf",
    "register_encoding",
    "UnknownTokenError",
    "encoding_for_model",
    "encoding_name_for_model",
    "list_encoding_names",
    "cache_info",
    "set_cache_size",
]
