"""The qwen2-vl kind's runtime part (:class:`mmaas.server.pipeline.PipelineRuntime`): from the
verified, loaded engines and assets to the generation model's executor, warmed up.

It reads, by fixed names (the spec part checks model.yaml has them): the engines ``vision``
and ``language`` (one loaded instance each; the engine thread runs them in turn), the assets
``runtime`` (runtime.json), ``tokenizer`` (tokenizer.json) and ``embed_tokens``
(embed_tokens.npy, memory-mapped), and ``pipeline.settings.max_input_pixels``.
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any

import numpy as np
from PIL import Image
from tokenizers import Tokenizer

from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget
from mmaas.pipelines.qwen2_vl.runtime.executor import GenerationExecutor
from mmaas.pipelines.qwen2_vl.runtime.generation import Generator
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest

ENGINES = ("vision", "language")
ASSETS = ("runtime", "tokenizer", "embed_tokens")
DEFAULT_MAX_INPUT_PIXELS = 64_000_000
log = logging.getLogger("mmaas.server")


class Qwen2VLRuntime:
    """See the module docstring. ``platform`` is what the model's ModelConfig reports;
    ``decoupled``: the executor streams (ModelConfig's ``model_transaction_policy``)."""

    platform = "mmaas_qwen2_vl"
    decoupled = True

    def executor(self, context: Any) -> GenerationExecutor:
        """Build the generator from ``context`` (a PipelineContext: engines, assets,
        settings), run one short generation as warm-up, return the executor.

        Raises:
            IntegrityError: runtime.json is not this runtime's, or an engine lacks the
                profile its limits come from.
        """
        vision, language = (context.engines[name] for name in ENGINES)
        settings = dict(context.settings)
        limits = Limits.from_engines(
            vision.manifest.model,
            language.manifest.model,
            int(settings.get("max_input_pixels", DEFAULT_MAX_INPUT_PIXELS)),
        )
        config = RuntimeConfig.read(context.assets["runtime"])
        generator = Generator(
            config,
            limits,
            Tokenizer.from_file(str(context.assets["tokenizer"])),
            np.load(context.assets["embed_tokens"], mmap_mode="r"),
            vision.instances[0],
            language.instances[0],
        )
        warm_up(generator)
        budget = DecodeBudget(context.server.max_decode_bytes)
        return GenerationExecutor(generator, limits.decode_batch, budget)


def warm_up(generator: Generator) -> None:
    """One 3-token generation over a 56x56 picture (prefill, two decode steps), so the first
    client's request meets warm engines."""
    started = time.perf_counter()
    picture = io.BytesIO()
    Image.new("RGB", (56, 56), (128, 64, 32)).save(picture, format="PNG")
    request = GenerationRequest("Hi", (picture.getvalue(),), 3, 0.0, 1.0, 0, None)
    seq, token, cache, mask = generator.prefill(generator.prepare(request))
    for _ in range(2):
        (token,), cache, mask = generator.decode([seq], [token], cache, mask)
    log.info("qwen2-vl warmed up: prefill + 2 decode steps (%.0f ms)",
             (time.perf_counter() - started) * 1000)  # fmt: skip
