"""Fixtures of the qwen2-vl runtime tests: the runtime's Generator over ONNX Runtime
sessions of the exported graphs (the same graphs the image's engines are compiled from),
session-scoped; transformers' reference pipeline is tests/pipelines/qwen2_vl/conftest.py's.

The two real pictures of different sizes: grace_hopper.jpg (512x600 -> 1512 patches) and
rocket.jpg (640x427 -> 1380 patches)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from tokenizers import Tokenizer

from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest

PAIR = ("grace_hopper.jpg", "rocket.jpg")
PROMPTS = ("Describe this picture.", "What is the person in the image holding, and why?")
# The limits of models/qwen-vl/model.yaml's profiles.
LIMITS = Limits(context=4096, prefill_chunk=1024, decode_batch=4, max_images=8,
                max_patches=4096, max_input_pixels=64_000_000)  # fmt: skip


class RawEngine:
    """An ONNX Runtime session on an exported graph, with the back ends' ``infer``."""

    def __init__(self, path: Path) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def infer(self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]) -> dict:
        return dict(zip(outputs, self.session.run(list(outputs), dict(inputs)), strict=True))


def encode(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    """An image's encoded bytes."""
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def request(text: str, images: Sequence[bytes] = (), **params: object) -> GenerationRequest:
    """A GenerationRequest with the interface's defaults for what ``params`` leaves out."""
    values: dict = {"max_tokens": None, "temperature": 0.0, "top_p": 1.0, "top_k": 0}
    values.update(params)
    return GenerationRequest(text, tuple(images), seed=values.pop("seed", None), **values)


def generate(generator: Generator, req: GenerationRequest) -> list[TokenEvent]:
    """One request inline (no scheduler): prefill, then decode steps until it finishes."""
    seq, token, cache, mask = generator.prefill(generator.prepare(req))
    events = []
    while True:
        events.append(generator.emit(seq, token))
        if events[-1].finish_reason:
            return events
        (token,), cache, mask = generator.decode([seq], [token], cache, mask)


@pytest.fixture(scope="session")
def generator(qwen_vl_export: Path) -> Generator:
    """The runtime's Generator on the export, with model.yaml's limits."""
    folder = qwen_vl_export
    return Generator(
        RuntimeConfig.read(folder / "runtime.json"),
        LIMITS,
        Tokenizer.from_file(str(folder / "tokenizer.json")),
        np.load(folder / "embed_tokens.npy", mmap_mode="r"),
        RawEngine(folder / "qwen2_vl_vision.onnx"),
        RawEngine(folder / "qwen2_vl_language.onnx"),
    )


@pytest.fixture(scope="session")
def pictures(qwen_vl_pictures: Path) -> dict[str, bytes]:
    """Every fetched picture's encoded bytes by file name."""
    return {path.name: path.read_bytes() for path in sorted(qwen_vl_pictures.iterdir())}
