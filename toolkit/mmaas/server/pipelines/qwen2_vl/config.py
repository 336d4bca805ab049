"""What the qwen2-vl runtime knows before its first request: runtime.json (the export's
checkpoint facts) and the limits that come from the built engines' optimization profiles.

| limit | from |
| --- | --- |
| context C (prompt + generated tokens) | language past max + 1, at most ``attention_mask`` max |
| prefill chunk (prompt tokens per run) | language ``inputs_embeds`` max, axis 1 |
| decode batch (rows per decode step) | language ``inputs_embeds`` max, axis 0 |
| images per request | vision ``grid_thw`` max, axis 0 |
| patches per request (after resizing) | vision ``pixel_values`` max, axis 0 |
| pixels per encoded image (before decoding) | ``pipeline.settings.max_input_pixels`` |

Why the context is the past's max + 1: the language engine has one optimization profile, a
box over (batch B, seq S, past P, total T = P + S). Every run the runtime makes stays inside
it: the prompt is prefilled in chunks of at most S_max tokens (chunk k at past k * S_max),
and the last decode step runs at past C - 1 = P_max, total C <= T_max. So one profile (also
one TensorRT profile) holds prefill and decode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmaas.core.errors import IntegrityError
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.pipelines.qwen2_vl.images import ImageSettings

SCHEMA = 1


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
        past = _max(language, "past_key_values.0.key", 2)
        return cls(
            context=min(past + 1, _max(language, "attention_mask", 1)),
            prefill_chunk=_max(language, "inputs_embeds", 1),
            decode_batch=_max(language, "inputs_embeds", 0),
            max_images=_max(vision, "grid_thw", 0),
            max_patches=_max(vision, "pixel_values", 0),
            max_input_pixels=max_input_pixels,
        )


@dataclass(frozen=True)
class RuntimeConfig:
    """runtime.json (schema 1, written by scripts/export_qwen_vl.py): image settings,
    token ids, the chat template's parts, the repetition penalty, engine dimensions."""

    image: ImageSettings
    tokens: dict[str, Any]
    prompt: dict[str, str]
    repetition_penalty: float
    num_layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int

    @classmethod
    def read(cls, path: Path) -> RuntimeConfig:
        """Parse runtime.json.

        Raises:
            IntegrityError: unreadable, another schema, or a key missing (the file was not
                written by this exporter).
        """
        try:
            data = json.loads(path.read_text())
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, this runtime reads {SCHEMA}")
            language = data["language"]
            return cls(
                image=ImageSettings.from_json(data["image"]),
                tokens=data["tokens"],
                prompt=data["prompt"],
                repetition_penalty=float(data["generation"]["repetition_penalty"]),
                num_layers=int(language["num_layers"]),
                kv_heads=int(language["kv_heads"]),
                head_dim=int(language["head_dim"]),
                hidden_size=int(language["hidden_size"]),
                vocab_size=int(language["vocab_size"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IntegrityError(
                f"{path}: not a qwen2-vl runtime.json ({exc}); re-run "
                "scripts/export_qwen_vl.py and rebuild"
            ) from exc

    @property
    def stop_ids(self) -> frozenset[int]:
        """Ids that end an answer (generation_config's eos_token_id list)."""
        return frozenset(int(t) for t in self.tokens["eos"])


def _max(model: ModelInfo, name: str, axis: int) -> int:
    tensor: TensorInfo | None = next((t for t in model.inputs if t.name == name), None)
    if tensor is None or tensor.max is None:
        raise IntegrityError(
            f"engine {model.name!r} has no profile for input {name!r}; the qwen2-vl "
            "pipeline reads its limits from it"
        )
    return int(tensor.max[axis])
