"""The request check of the vision engine served raw (``<name>-vision``: embeddings for
clients that preprocess themselves, or a model of its own made from the vision export): the
graph clamps ``grid_thw`` and never fails, so a grid that does not describe
``pixel_values`` would give wrong embeddings instead of an error. The engine is recognised
by its signature (:func:`check_for`), wherever it is served.
Checked before the batcher: patch count a multiple of merge^2 (4), every row t >= 1 and h, w
multiples of the merge size, and sum of t*h*w equal to the patch count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from mmaas.core.errors import InputError
from mmaas.core.manifest import ModelInfo

VISION_INPUTS = {"pixel_values": ("FP32", 2), "grid_thw": ("INT64", 2)}  # datatype, rank


def check_vision_request(inputs: Mapping[str, np.ndarray], merge: int = 2) -> None:
    """``pixel_values`` FP32 [N, 1176] and ``grid_thw`` INT64 [I, 3] must agree.

    Raises:
        InputError: naming the rule, the patch count and the grid.
    """
    patches = int(inputs["pixel_values"].shape[0])
    grid = np.asarray(inputs["grid_thw"]).reshape(-1, 3)
    area = merge * merge
    if patches % area:
        raise InputError(
            f"input 'pixel_values': {patches} patches is not a multiple of {area} (the patch "
            f"merger joins {merge}x{merge} patches); send the processor's patches"
        )
    rows = grid.tolist()
    for index, (t, h, w) in enumerate(rows):
        if t < 1 or h < merge or w < merge or h % merge or w % merge:
            raise InputError(
                f"input 'grid_thw': row {index} is {[t, h, w]}; t must be >= 1 and h, w "
                f"positive multiples of {merge} (patches per side of a resized image)"
            )
    total = sum(t * h * w for t, h, w in rows)
    if total != patches:
        raise InputError(
            f"input 'grid_thw': {rows} describes {total} patches (sum of t*h*w), but "
            f"'pixel_values' holds {patches}; send the grid of the patches you send"
        )


def check_for(info: ModelInfo) -> Callable[[Mapping[str, np.ndarray]], None] | None:
    """:func:`check_vision_request` for an engine with the vision engine's signature
    (exactly the inputs ``pixel_values`` FP32 [patches, C] and ``grid_thw`` INT64
    [images, 3]), else None."""
    inputs = {t.name: (t.datatype, len(t.shape)) for t in info.inputs}
    grid = next((t for t in info.inputs if t.name == "grid_thw"), None)
    if inputs != VISION_INPUTS or grid is None or grid.shape[-1] != 3:
        return None
    return check_vision_request
