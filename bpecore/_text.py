"""Text that has a UTF-8 form: lone surrogates become U+FFFD, as tiktoken does (same length, so
character offsets stay true)."""


def clean(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8(text: str) -> bytes:
    """UTF-8 of ``text``, lone surrogates replaced by U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean(text).encode("utf-8")
