"""A bound on the bytes of decoded pictures in flight (``MMAAS_MAX_DECODE_BYTES``), so that
concurrent requests with large pictures cannot take the server's memory: without it, 12
pictures just inside the 64-megapixel budget took a container from 0.41 to 4.57 GB.

A request's cost is read from its pictures' headers before anything is decoded:
width x height x 8 bytes per picture (the decoded picture, up to 4 bytes a pixel, and its
RGB copy). A request waits until its cost fits beside the requests already decoding
(first come, first served); a request whose cost alone is over the bound is refused
(INVALID_ARGUMENT naming the setting) rather than waiting forever.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from PIL import Image

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.images import FORMATS

BYTES_PER_PIXEL = 8  # the decoded picture (<= 4 bytes a pixel) and its RGB copy


def decode_cost(images: Sequence[bytes]) -> int:
    """Bytes the pictures take once decoded, from their headers (a picture whose header
    does not open costs nothing here: decoding refuses it)."""
    total = 0
    for data in images:
        try:
            with Image.open(io.BytesIO(data), formats=FORMATS) as image:
                width, height = image.size
        except Exception:  # any header the decoder will refuse with its own message
            continue
        total += width * height * BYTES_PER_PIXEL
    return total


class DecodeBudget:
    """The bound (``limit`` bytes) shared by every request of one executor."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._changed: asyncio.Condition | None = None  # made on the event loop

    @asynccontextmanager
    async def hold(self, images: Sequence[bytes]) -> AsyncIterator[int]:
        """Hold the pictures' cost while the block decodes them (waits for room).

        Raises:
            InputError: their cost alone is over the bound.
        """
        cost = decode_cost(images)
        if cost > self.limit:
            raise InputError(
                f"input 'image': the pictures take {cost} bytes decoded ({BYTES_PER_PIXEL} "
                f"per pixel), over the server's bound of {self.limit} bytes of decoded "
                "pictures in flight (MMAAS_MAX_DECODE_BYTES); send smaller pictures"
            )
        changed = self._changed = self._changed or asyncio.Condition()
        async with changed:
            await changed.wait_for(lambda: self.used + cost <= self.limit)
            self.used += cost
        try:
            yield cost
        finally:
            async with changed:
                self.used -= cost
                changed.notify_all()
