"""Image embeddings: the vision engine's runs for the pictures of a request, and a cache of
their embeddings keyed by each picture's content hash.

Cache: a picture's embeddings depend only on its encoded bytes (decoding and preprocessing
are deterministic), so they are kept under the sha256 of those bytes, least recently used
out first (``image_cache`` entries; 0 = off). A request whose picture is cached skips its
decoding, preprocessing and vision run.

Patch-count buckets: a vision engine on a GPU replays a CUDA graph only at its captured
shapes, so a run is padded to the smallest ``vision_patch_buckets`` entry that holds it:
``grid_thw`` gets dummy images up to ``max_images`` rows (each (1, 2, 2) = 4 patches, the
last one taking the rest as (1, 2, rest / 2)) and ``pixel_values`` zero patches to the
bucket. Attention is block-diagonal per frame and the merger joins 4 patches of one image,
so the real images' embeddings are those of the unpadded run; the dummies' are cut off.
With no bucket that fits (or none configured) the run is not padded.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Grid = tuple[int, int, int]


@dataclass
class Picture:
    """One picture of a request: its content hash, grid, and either its pixel_values FP32
    [t*h*w, 1176] (to encode) or its embeddings FP32 [t*h*w / merge^2, hidden] (cached)."""

    key: str
    grid: Grid
    pixels: np.ndarray | None = None
    embeds: np.ndarray | None = None


def content_key(data: bytes) -> str:
    """The cache key of an encoded picture: sha256 of its bytes, hex."""
    return hashlib.sha256(data).hexdigest()


class ImageEmbeddings:
    """The vision engine (``infer``) behind the cache and the bucket padding (module doc)."""

    def __init__(self, engine: Any, merge: int, max_images: int, buckets: Sequence[int],
                 entries: int) -> None:  # fmt: skip
        self.engine, self.merge, self.max_images = engine, merge, max_images
        self.buckets = sorted(buckets)
        self.entries = entries
        self.cache: OrderedDict[str, tuple[Grid, np.ndarray]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def cached(self, key: str) -> tuple[Grid, np.ndarray] | None:
        """The grid and embeddings of a cached picture (and count the hit or miss)."""
        with self.lock:
            found = self.cache.get(key)
            if found is None:
                self.misses += 1
                return None
            self.cache.move_to_end(key)
            self.hits += 1
            return found

    def fill(self, pictures: Sequence[Picture]) -> None:
        """Encode every picture that has no embeddings yet, in one vision run, and cache
        them."""
        todo = [p for p in pictures if p.embeds is None]
        if not todo:
            return
        pixels = np.concatenate([p.pixels for p in todo if p.pixels is not None])
        grids = [p.grid for p in todo]
        embeds = self.run(pixels, grids)
        start = 0
        for picture in todo:
            count = int(np.prod(picture.grid)) // self.merge**2
            picture.embeds, start = embeds[start : start + count], start + count
            picture.pixels = None
            self.remember(picture.key, picture.grid, picture.embeds)

    def remember(self, key: str, grid: Grid, embeds: np.ndarray) -> None:
        """Cache a picture's embeddings (the least recently used leave past ``entries``)."""
        if self.entries <= 0:
            return
        with self.lock:
            self.cache[key] = (grid, embeds)
            self.cache.move_to_end(key)
            while len(self.cache) > self.entries:
                self.cache.popitem(last=False)

    def run(self, pixels: np.ndarray, grids: Sequence[Grid]) -> np.ndarray:
        """image_embeds FP32 [N / merge^2, hidden] of ``pixels`` [N, features], padded to a
        bucket when one holds it."""
        patches, area = len(pixels), self.merge**2
        dummies = self.max_images - len(grids)
        bucket = next((b for b in self.buckets if b >= patches + area * dummies), None)
        grid_rows = [list(g) for g in grids]
        if bucket is not None and dummies > 0:
            rest = bucket - patches - area * (dummies - 1)
            grid_rows += [[1, self.merge, self.merge]] * (dummies - 1)
            grid_rows.append([1, self.merge, rest // self.merge])
            padded = np.zeros((bucket, pixels.shape[1]), np.float32)
            padded[:patches] = pixels
            pixels = padded
        elif bucket is not None and bucket != patches:
            bucket = None  # every grid row is a real image: no room for a dummy
        feeds = {"pixel_values": pixels, "grid_thw": np.array(grid_rows, np.int64)}
        embeds: np.ndarray = self.engine.infer(feeds, ["image_embeds"])["image_embeds"]
        return np.asarray(embeds[: patches // area], np.float32)
