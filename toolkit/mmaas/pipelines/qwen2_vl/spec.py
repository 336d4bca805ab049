"""The ``qwen2-vl`` pipeline kind (spec part): a vision-language generation model composed of
a Qwen2-VL vision engine and language engine, with its tokenizer, embedding table and
runtime.json as assets (all written by ``mmaas convert qwen2-vl``)::

    engines:
      vision:   {source: {path: qwen2_vl_vision.onnx}, ...}    # pixel_values, grid_thw
      language: {source: {path: qwen2_vl_language.onnx}, ...}  # KV-cache decoder
    assets:
      runtime: runtime.json
      tokenizer: tokenizer.json
      embed_tokens: embed_tokens.npy
    pipeline:
      kind: qwen2-vl
      serve_engines: [vision]            # embeddings for clients that preprocess themselves
      settings: {max_input_pixels: 64000000}

Checks (every problem at once, under ``pipeline.settings``): the engines and assets are
there with the tensors the runtime feeds; the language profile's min, opt and max points
are each consistent (attention_mask length = past + seq, one batch size, position_ids
[3, batch, seq]) so that the build's profile check runs real shapes; the image embeddings'
width is the language width; runtime.json is schema 1, describes these engines (layers,
kv heads, head dim, vocabulary), pins the tokenizer and embedding table given as assets,
and its chat template was proved for as many images as the vision profile takes.

The served signature is Triton's LLM interface (text_input, image, max_tokens, temperature,
top_p, top_k, seed, stop, stream -> text_output, output_ids, finish_reason,
num_input_tokens): see
:mod:`mmaas.pipelines.qwen2_vl.runtime.request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.pipelines.qwen2_vl.config import MAX_STOPS
from mmaas.pipelines.qwen2_vl.spec_checks import check_assets, check_engines
from mmaas.spec.pipeline import PipelineSignature
from mmaas.spec.yamlio import KeyPath

SCALARS = {"max_tokens": "INT32", "temperature": "FP32", "top_p": "FP32", "top_k": "INT32",
           "seed": "INT32", "stream": "BOOL"}  # fmt: skip


class Qwen2VLSettings(BaseModel):
    """``pipeline.settings`` of qwen2-vl: ``max_input_pixels``, the largest encoded picture
    (width x height, read from its header before decoding) a request may send; larger ones
    are refused (a decompression bomb never decodes)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_input_pixels: Annotated[int, Field(ge=1)] = 64_000_000


class Qwen2VLKind:
    """The spec part of the qwen2-vl kind (:class:`mmaas.spec.pipeline.PipelineKind`)."""

    settings = Qwen2VLSettings

    def check(
        self, settings: Qwen2VLSettings, engines: Mapping[str, ModelInfo],
        assets: Mapping[str, Path],
    ) -> list[tuple[KeyPath, str]]:  # fmt: skip
        """Every problem (see the module docstring), located under ``pipeline.settings``."""
        problems = check_engines(engines)
        if not problems:
            problems += check_assets(engines, assets)
        return problems

    def signature(
        self, settings: Qwen2VLSettings, engines: Mapping[str, ModelInfo]
    ) -> PipelineSignature:
        """Triton's LLM interface; ``image`` takes up to the vision profile's images."""
        grid = next(t for t in engines["vision"].inputs if t.name == "grid_thw")
        max_images = grid.max[0] if grid.max else 1
        one = (1,)
        inputs = [
            TensorInfo("text_input", "BYTES", one, one, one, one),
            TensorInfo("image", "BYTES", (-1,), (0,), (1,), (max_images,), optional=True),
            TensorInfo("stop", "BYTES", (-1,), (0,), (1,), (MAX_STOPS,), optional=True),
        ]
        inputs += [TensorInfo(n, d, one, one, one, one, optional=True) for n, d in SCALARS.items()]
        outputs = (
            TensorInfo("text_output", "BYTES", one),
            TensorInfo("output_ids", "INT32", (-1,)),
            TensorInfo("finish_reason", "BYTES", one),
            TensorInfo("num_input_tokens", "INT32", one),
        )
        return PipelineSignature(inputs=tuple(inputs), outputs=outputs, max_batch_size=0)
