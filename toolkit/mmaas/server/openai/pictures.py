"""A chat request's pictures as bytes: ``data:`` URLs decoded here, ``http(s)`` URLs fetched
(:mod:`.fetch`), both checked to hold a picture of an accepted format by its first bytes
(the pipeline then decodes it by its own rules: models/qwen-vl/README.md). Every refusal
is a :class:`~.errors.ChatError` (400) with ``param`` at the content part's URL, and never
echoes the data.
"""

from __future__ import annotations

import base64
import binascii

from mmaas.server.openai.errors import ChatError

MAGIC = {  # the accepted picture formats' first bytes, by MIME type
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/jpg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "image/bmp": (b"BM",),
    "image/tiff": (b"II*\x00", b"MM\x00*"),
}
ACCEPTED = ", ".join(sorted({mime for mime in MAGIC if mime != "image/jpg"}))
SCHEMES = ("data", "http", "https")  # the picture URLs a request may send


def url_scheme(url: str) -> str:
    """``url``'s scheme in lower case ("" when it has none): schemes are case-insensitive
    (RFC 3986 section 3.1), so ``DATA:`` and ``HTTP://`` are ``data:`` and ``http://``."""
    scheme, colon, _ = url.partition(":")
    return scheme.lower() if colon else ""


def sniff(data: bytes) -> str | None:
    """The accepted format ``data`` starts as (its MIME type), or None."""
    return next((mime for mime, marks in MAGIC.items() if data.startswith(marks)), None)


def data_url_bytes(url: str, param: str) -> bytes:
    """The picture a ``data:image/<format>;base64,...`` URL holds.

    Raises:
        ChatError: not base64, a MIME type that is no accepted picture format, or bytes of
            another format than it declares.
    """
    header, comma, payload = url.partition(",")
    mime = header[5:].split(";")[0].strip().lower()
    if not comma or not header.lower().endswith(";base64"):
        raise ChatError("the data URL must be base64 encoded (data:<type>;base64,<data>)", param)
    if mime not in MAGIC:
        raise ChatError(f"pictures of type {mime!r:.40} are not accepted; send {ACCEPTED}", param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ChatError("the data URL does not hold valid base64", param) from None
    if not data.startswith(MAGIC[mime]):
        raise ChatError(f"the data URL declares {mime} but its bytes are not a {mime} file",
                        param)  # fmt: skip
    return data
