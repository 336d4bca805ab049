"""The ``qwen2-vl`` pipeline kind (spec part): a vision-language generation model composed of
a Qwen2-VL vision engine and language engine, with its tokenizer, embedding table and
runtime.json as assets (all written by ``mmaas convert qwen2-vl``)::

    engines:
      vision:   {source: {path: qwen2_vl_vision.onnx}, ...}    # pixel_values, grid_thw
      language: {source: {path: qwen2_vl_language.onnx}, ...}  # in-place KV-cache decoder
    assets:
      runtime: runtime.json
      tokenizer: tokenizer.json
      embed_tokens: embed_tokens.npy
    pipeline:
      kind: qwen2-vl
      serve_engines: [vision]            # embeddings for clients that preprocess themselves
      settings: {max_input_pixels: 64000000}

Checks (every problem at once, under ``pipeline.settings``): the engines and assets are
there with the tensors the runtime feeds (:mod:`mmaas.core.decoder`); the language
profile's min, opt and max points are each consistent (one batch size, position_ids
[3, batch, seq]) so that the build's profile check runs real shapes; the settings fit the
profiles (sequences, decode batches, patch buckets); the image embeddings' width is the
language width; runtime.json is of the schema this mmaas reads, describes these engines
(layers, kv heads, head dim, vocabulary), pins the tokenizer and embedding table given as
assets, and its chat template was proved for as many images as the vision profile takes.

The served signature is Triton's LLM interface (text_input or messages, image, max_tokens,
temperature, top_p, top_k, seed, presence_penalty, frequency_penalty, logprobs, stop,
stream -> text_output, output_ids, finish_reason, num_input_tokens, output_logprobs): see
:mod:`mmaas.pipelines.qwen2_vl.runtime.request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.pipelines.qwen2_vl.config import MAX_STOPS
from mmaas.pipelines.qwen2_vl.spec_checks import check_assets, check_engines, check_settings
from mmaas.spec.pipeline import PipelineSignature
from mmaas.spec.yamlio import KeyPath

SCALARS = {"max_tokens": "INT32", "temperature": "FP32", "top_p": "FP32", "top_k": "INT32",
           "seed": "INT32", "presence_penalty": "FP32", "frequency_penalty": "FP32",
           "logprobs": "INT32", "stream": "BOOL"}  # fmt: skip


class Qwen2VLSettings(BaseModel):
    """``pipeline.settings`` of qwen2-vl (the runtime reads the same keys and defaults:
    :class:`mmaas.pipelines.qwen2_vl.runtime.pipeline.Settings`):

    * ``max_input_pixels``: the largest encoded picture (width x height, read from its header
      before decoding) a request may send; larger ones are refused (a decompression bomb
      never decodes);
    * ``max_sequences``: requests generated at once, each holding a KV-cache slot (default:
      the language profile's batch; at most that);
    * ``kv_cache_memory``: the share of the memory free after the engines load (GPU, or
      host for a CPU engine) the KV cache may take; fewer sequences when it holds fewer;
    * ``max_prefill_tokens``: prompt tokens (padding counted) prefilled per engine turn,
      between decode steps;
    * ``image_cache``: pictures whose embeddings are kept, by content hash (0 = off);
    * ``vision_patch_buckets``: the patch counts the vision engine replays CUDA graphs at
      (its ``cuda_graph_shapes``): runs are padded to the smallest that holds them;
    * ``decode_batches``: the decode batch sizes captured (default: 1, 2, 4, then multiples
      of 8 on a GPU; every size on a CPU).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_input_pixels: Annotated[int, Field(ge=1)] = 64_000_000
    max_sequences: Annotated[int, Field(ge=1)] | None = None
    kv_cache_memory: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_prefill_tokens: Annotated[int, Field(ge=1)] = 8192
    image_cache: Annotated[int, Field(ge=0)] = 64
    vision_patch_buckets: list[Annotated[int, Field(ge=4, multiple_of=4)]] = Field(
        default_factory=list
    )
    decode_batches: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)


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
            problems += check_assets(engines, assets) + check_settings(settings, engines)
        return problems

    def signature(
        self, settings: Qwen2VLSettings, engines: Mapping[str, ModelInfo]
    ) -> PipelineSignature:
        """Triton's LLM interface; ``image`` takes up to the vision profile's images."""
        grid = next(t for t in engines["vision"].inputs if t.name == "grid_thw")
        max_images = grid.max[0] if grid.max else 1
        one = (1,)
        inputs = [
            TensorInfo("text_input", "BYTES", one, one, one, one, optional=True),
            TensorInfo("messages", "BYTES", one, one, one, one, optional=True),
            TensorInfo("image", "BYTES", (-1,), (0,), (1,), (max_images,), optional=True),
            TensorInfo("stop", "BYTES", (-1,), (0,), (1,), (MAX_STOPS,), optional=True),
        ]
        inputs += [TensorInfo(n, d, one, one, one, one, optional=True) for n, d in SCALARS.items()]
        outputs = (
            TensorInfo("text_output", "BYTES", one),
            TensorInfo("output_ids", "INT32", (-1,)),
            TensorInfo("finish_reason", "BYTES", one),
            TensorInfo("num_input_tokens", "INT32", one),
            TensorInfo("output_logprobs", "BYTES", (-1,)),
        )
        return PipelineSignature(inputs=tuple(inputs), outputs=outputs, max_batch_size=0)
