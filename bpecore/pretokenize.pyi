CL100K_PATTERN: str
O200K_PATTERN: str
R50K_PATTERN: str
LLAMA3_PATTERN: str
QWEN2_PATTERN: str
TEKKEN_PATTERN: str
DEEPSEEK3_PATTERN: str
DEEPSEEK3_CJK: str
TABLES_REGEX_VERSION: str

def pattern_kind(pattern: str | None) -> int: ...
def piece_ends(kind_or_pattern: int | str | None, utf8: bytes) -> list[int]: ...
def split(kind_or_pattern: int | str | None, text: str) -> list[str]: ...
def _piece_horizon(kind: int, utf8: bytes, start: int, end: int) -> int: ...
