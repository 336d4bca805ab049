"""The qwen2-vl runtime's served limits, read from the built engines' optimization profiles
(and ``pipeline.settings.max_input_pixels``), never from a setting the server reads.

| limit | from |
| --- | --- |
| context C (prompt + generated tokens) | the KV cache's capacity: language past axis 2 |
| prefill chunk (prompt tokens per run) | language ``inputs_embeds`` max, axis 1 |
| decode batch (rows per decode step) | language ``inputs_embeds`` max, axis 0 |
| images per request | vision ``grid_thw`` max, axis 0 |
| patches per request (after resizing) | vision ``pixel_values`` max, axis 0 |
| pixels per encoded image (before decoding) | ``pipeline.settings.max_input_pixels`` |

Why these: the language engine's cache rows hold ``capacity`` tokens each (fixed when the
graph was written), so a prompt and its answer fit in C = capacity; the profile's box over
(batch B, seq S) holds every run the runtime makes: prompt chunks of at most S_max tokens,
decode steps of at most B_max rows (:mod:`mmaas.core.decoder`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import ModelInfo, TensorInfo


@dataclass(frozen=True)
class Limits:
    """The served limits (see the module docstring); counts of tokens, images, patches,
    rows and pixels."""

    context: int
    prefill_chunk: int
    decode_batch: int
    max_images: int
    max_patches: int
    max_input_pixels: int

    @classmethod
    def from_engines(cls, vision: ModelInfo, language: ModelInfo, max_input_pixels: int) -> Limits:
        """Read the limits from the two engines' signatures.

        Raises:
            IntegrityError: an engine lacks an input the pipeline needs, or has no profile.
        """
        return cls(
            context=_max(language, "past_key_values.0.key", 2),
            prefill_chunk=_max(language, "inputs_embeds", 1),
            decode_batch=_max(language, "inputs_embeds", 0),
            max_images=_max(vision, "grid_thw", 0),
            max_patches=_max(vision, "pixel_values", 0),
            max_input_pixels=max_input_pixels,
        )


def _max(model: ModelInfo, name: str, axis: int) -> int:
    tensor: TensorInfo | None = next((t for t in model.inputs if t.name == name), None)
    if tensor is None or tensor.max is None:
        raise IntegrityError(
            f"engine {model.name!r} has no profile for input {name!r}; the qwen2-vl "
            "pipeline reads its limits from it"
        )
    return int(tensor.max[axis])
