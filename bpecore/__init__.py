"""bpecore: exact, fast BPE token counting, splitting and chunking, identical to tiktoken."""

from bpecore.encoding import Encoding as Encoding
from bpecore.load import VocabError as VocabError
from bpecore.registry import get_encoding as get_encoding
from bpecore.registry import list_encodings as list_encodings
from bpecore.registry import load_hf as load_hf
from bpecore.registry import load_tiktoken as load_tiktoken
from bpecore.registry import register_encoding as register_encoding

__version__ = "0.1.0"

__all__ = [
    "Encoding",
    "VocabError",
    "get_encoding",
    "list_encodings",
    "load_hf",
    "load_tiktoken",
    "register_encoding",
]
