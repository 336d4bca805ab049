"""The qwen2-vl kind's runtime part (:class:`mmaas.server.pipeline.PipelineRuntime`): from the
verified, loaded engines and assets to the generation model's executor, warmed up.

It reads, by fixed names (the spec part checks model.yaml has them): the engines ``vision``
and ``language`` (one loaded instance each; the language engine through its back end's
bound-engine capability), the assets ``runtime`` (runtime.json), ``tokenizer``
(tokenizer.json) and ``embed_tokens`` (embed_tokens.npy, memory-mapped), and
``pipeline.settings`` (:class:`Settings`). Start-up: size and allocate the KV cache (logged),
start the engine thread, capture the decode batches on it, then one short generation.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image
from tokenizers import Tokenizer

from mmaas.backends.bound import bound_engine
from mmaas.core.datatypes import element_size
from mmaas.core.errors import IntegrityError
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget
from mmaas.pipelines.qwen2_vl.runtime.executor import GenerationExecutor
from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.kvcache import Slots, size_cache
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns, decode_batches
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest
from mmaas.pipelines.qwen2_vl.runtime.scheduler import Scheduler
from mmaas.server.llm_metrics import GenerationMetrics

ENGINES = ("vision", "language")
ASSETS = ("runtime", "tokenizer", "embed_tokens")
log = logging.getLogger("mmaas.server")


@dataclass(frozen=True)
class Settings:
    """``pipeline.settings`` as the runtime reads them (the spec part validated them; the
    defaults are its defaults): pixels per encoded picture; sequences generated at once
    (None: the language profile's batch); the KV cache's share of the free memory; prompt
    tokens per prefill turn; pictures whose embeddings are kept; the vision engine's
    captured patch counts; the decode batch sizes (empty: automatic)."""

    max_input_pixels: int = 64_000_000
    max_sequences: int | None = None
    kv_cache_memory: float = 0.9
    max_prefill_tokens: int = 8192
    image_cache: int = 64
    vision_patch_buckets: tuple[int, ...] = ()
    decode_batches: tuple[int, ...] = ()

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Settings:
        """From the manifest's JSON (absent keys: defaults)."""
        values: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in data.items()
        }
        return cls(**values)


class Qwen2VLRuntime:
    """See the module docstring. ``platform`` is what the model's ModelConfig reports;
    ``decoupled``: the executor streams (ModelConfig's ``model_transaction_policy``)."""

    platform = "mmaas_qwen2_vl"
    decoupled = True

    def executor(self, context: Any) -> GenerationExecutor:
        """Build, start and warm up the generation executor from ``context`` (a
        PipelineContext: engines, assets, settings).

        Raises:
            IntegrityError: runtime.json is not this runtime's, an engine lacks the profile
                its limits come from, the language engine's back end cannot run it in
                place, or the KV cache budget holds no sequence.
        """
        vision, language = (context.engines[name] for name in ENGINES)
        settings = Settings.read(context.settings)
        limits = Limits.from_engines(vision.manifest.model, language.manifest.model,
                                     settings.max_input_pixels)  # fmt: skip
        config = RuntimeConfig.read(context.assets["runtime"])
        bound = bound_engine(language.instances[0])
        if bound is None:
            raise IntegrityError(
                f"the language engine's back end ({language.manifest.model.backend}) cannot "
                "run it in place (no bound-engine capability); the qwen2-vl runtime needs one"
            )
        dims = config.language
        cache_type = next(t.datatype for t in language.manifest.model.inputs
                          if t.name == "past_key_values.0.key")  # fmt: skip
        wanted = settings.max_sequences or limits.decode_batch
        batches = list(settings.decode_batches) or decode_batches(
            wanted, bound.graphs, limits.decode_batch
        )
        slot = 2 * dims.num_layers * dims.kv_heads * limits.context * dims.head_dim
        size = size_cache(slot * element_size(cache_type), limits.context, batches, wanted,
                          bound.free_memory(), settings.kv_cache_memory)  # fmt: skip
        log.info("%s (%s)", size.describe(), cache_type)
        runs = LanguageRuns(bound, dims, limits.context, size.rows, cache_type)
        generator = Generator(
            config, limits, Tokenizer.from_file(str(context.assets["tokenizer"])),
            np.load(context.assets["embed_tokens"], mmap_mode="r"), vision.instances[0],
            settings.image_cache, settings.vision_patch_buckets,
        )  # fmt: skip
        metrics = GenerationMetrics(context.model.metrics.labels)
        scheduler = Scheduler(generator, runs, Slots(size.sequences), limits.prefill_chunk,
                              settings.max_prefill_tokens, metrics,
                              context.server.batching.max_queue_size)  # fmt: skip
        scheduler.start(lambda: runs.capture([b for b in batches if b <= size.rows]))
        warm_up(generator, scheduler)
        scheduler.metrics = metrics = GenerationMetrics(context.model.metrics.labels)  # clients'
        budget = DecodeBudget(context.server.max_decode_bytes)
        return GenerationExecutor(generator, scheduler, metrics, budget)


def warm_up(generator: Generator, scheduler: Scheduler) -> None:
    """One 3-token generation over a 56x56 picture (vision, prefill, two decode steps)
    through the engine thread, so the first client's request meets warm engines.

    Raises:
        Exception: the engines failed.
    """
    started = time.perf_counter()
    picture = io.BytesIO()
    Image.new("RGB", (56, 56), (128, 64, 32)).save(picture, format="PNG")
    request = GenerationRequest("Hi", (picture.getvalue(),), 3, 0.0, 1.0, 0, None)
    done, failure = threading.Event(), []

    def sink(event: TokenEvent | BaseException) -> None:
        if isinstance(event, BaseException):
            failure.append(event)
        if isinstance(event, BaseException) or event.finish_reason:
            done.set()

    scheduler.submit(generator.prepare(request), sink)
    done.wait()
    if failure:
        raise failure[0]
    log.info("qwen2-vl warmed up: vision, prefill and 2 decode steps (%.0f ms)",
             (time.perf_counter() - started) * 1000)  # fmt: skip
