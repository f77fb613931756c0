"""Image sizes from a data URL's header bytes, and OpenAI's two image-token geometries.

``image_size`` reads width and height from the first bytes of a PNG, JPEG, GIF or WebP file, parsed
by hand (a few lines per format, no imaging library needed): only as much of the base64 payload as
the header needs is decoded. Remote URLs are never fetched.

``tile_count`` and ``patch_count`` are the geometry of OpenAI's vision pricing rules ("Images and
vision", "Calculating costs"); the per-model constants that turn them into tokens live in
``bpecore.chat.CHAT_RULES``.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

__all__ = ["image_size", "patch_count", "tile_count"]


def tile_count(width: int, height: int) -> int:
    """512-px tiles of a ``detail: high`` image: fit in 2048x2048, then shortest side 768.

    >>> tile_count(1024, 1024), tile_count(2048, 4096)
    (4, 6)
    """
    w, h = float(width), float(height)
    if w > 2048 or h > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return math.ceil(w / 512) * math.ceil(h / 512)


def patch_count(width: int, height: int, cap: int = 1536) -> int:
    """32-px patches covering the image, scaled down to at most ``cap`` patches.

    >>> patch_count(1024, 1024), patch_count(1800, 2400)
    (1024, 1452)
    """
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if patches <= cap:
        return patches
    r = math.sqrt(32 * 32 * cap / (width * height))
    wp, hp = width * r / 32, height * r / 32
    r *= min(math.floor(wp) / wp, math.floor(hp) / hp)
    return min(cap, math.ceil(width * r / 32) * math.ceil(height * r / 32))


def _decoded(payload: str, n: int) -> bytes:
    """The first ``n`` bytes (or fewer, at the end) of a base64 payload, decoding no more."""
    chunk = "".join(payload[: (n // 3 + 2) * 4].split())
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk, validate=True)[:n]
    except binascii.Error:
        raise ValueError("the image data URL's base64 payload is malformed") from None


def _jpeg_size(read) -> tuple[int, int]:
    data = read(1 << 12)
    i = 2
    while True:
        while i + 9 > len(data):
            more = read(len(data) * 4)
            if len(more) == len(data):
                raise ValueError("JPEG without a frame header (SOF)")
            data = more
        if data[i] != 0xFF:
            raise ValueError("malformed JPEG marker")
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        i += 2 + length


def _size(read) -> tuple[int, int]:
    head = read(32)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        kind = head[12:16]
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", head[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L":
            b = int.from_bytes(head[21:25], "little")
            return (b & 0x3FFF) + 1, ((b >> 14) & 0x3FFF) + 1
        if kind == b"VP8X":
            return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(
                head[27:30], "little"
            ) + 1
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(read)
    raise ValueError("image data is not a PNG, JPEG, GIF or WebP file (or is truncated)")


def image_size(url: str) -> tuple[int, int]:
    """``(width, height)`` of the image in a ``data:image/...;base64,`` URL, from its header bytes.

    A remote (``http(s)://``) URL is refused with a ``ValueError``: it is never fetched.

    >>> image_size("data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
    (1, 1)
    """
    if not url.startswith("data:"):
        raise ValueError(
            f"image {url[:60]!r} is not fetched: send it as a base64 data URL, "
            "or give its width and height in the image_url object"
        )
    meta, sep, payload = url.partition(",")
    if not sep or not meta.endswith(";base64"):
        raise ValueError("an image data URL must be base64: data:image/<type>;base64,<data>")
    return _size(lambda n: _decoded(payload, n))
