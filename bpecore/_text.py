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


def valid(text: str) -> str:
    """``text``, with lone surrogates replaced (same length, so offsets stay true)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return clean(text)


# Pushed text: what every streaming counter takes (the compiled ones in appendable.pyx, the
# Python ones in encoding.py and hf.py), one set of rules for all of them.


def _pushed_bytes(data) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"push takes str or bytes, not {type(data).__name__}")
    return bytes(data)


def _decode_complete(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"pushed bytes are not complete UTF-8: {e.reason} at byte {e.start}"
        ) from None


def complete_text(data: str | bytes) -> str:
    """Text pushed in front: a str (a lone surrogate is U+FFFD) or complete UTF-8 (ValueError
    otherwise; TypeError for anything else)."""
    if isinstance(data, str):
        return valid(data)
    return _decode_complete(_pushed_bytes(data))


def complete_utf8(data: str | bytes) -> bytes:
    """``complete_text(data)`` as UTF-8."""
    if isinstance(data, str):
        return utf8(data)
    raw = _pushed_bytes(data)
    _decode_complete(raw)
    return raw


class PushedText:
    """Text pushed at the end: a character cut in two is held back until its last byte, a lone
    surrogate in a str is U+FFFD, and invalid UTF-8, a str after bytes that stop inside a
    character or a push of anything else raise and leave the input as it was."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def text(self, data: str | bytes) -> str:
        """The complete characters ``data`` finishes (with the bytes held back before it)."""
        if isinstance(data, str):
            self._after_complete()
            return valid(data)
        return self._decode(data)

    def utf8(self, data: str | bytes) -> bytes:
        """``text(data)`` as UTF-8."""
        if isinstance(data, str):
            self._after_complete()
            return utf8(data)
        return self._decode(data).encode("utf-8")

    @property
    def pending(self) -> bytes:
        """The bytes of a character not complete yet."""
        return self._decoder.getstate()[0]

    def _after_complete(self) -> None:
        if self._decoder.getstate()[0]:
            raise ValueError("a str push follows bytes that stop inside a UTF-8 character")

    def _decode(self, data) -> str:
        raw = _pushed_bytes(data)
        state = self._decoder.getstate()
        try:
            return self._decoder.decode(raw, False)
        except UnicodeDecodeError as e:
            self._decoder.setstate(state)
            raise ValueError(
                f"invalid UTF-8 in pushed bytes: {e.reason} at byte {e.start}"
            ) from None
