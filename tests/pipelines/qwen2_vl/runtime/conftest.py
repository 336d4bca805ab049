"""Fixtures of the qwen2-vl runtime tests: the runtime's generation loop over ONNX Runtime
sessions of the exported graphs (the same graphs the image's engines are compiled from): a
Generator, LanguageRuns over the back end's bound engine (the KV cache in host memory) and
the Scheduler's engine thread; transformers' reference pipeline is
tests/pipelines/qwen2_vl/conftest.py's.

The two real pictures of different sizes: grace_hopper.jpg (512x600 -> 1512 patches) and
rocket.jpg (640x427 -> 1380 patches)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from tokenizers import Tokenizer

from mmaas.backends.onnxruntime.runtime import OnnxRuntimeEngine
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.kvcache import Slots
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest
from mmaas.pipelines.qwen2_vl.runtime.scheduler import Scheduler
from mmaas.server.llm_metrics import GenerationMetrics

PAIR = ("grace_hopper.jpg", "rocket.jpg")
PROMPTS = ("Describe this picture.", "What is the person in the image holding, and why?")
# The limits of models/qwen-vl/model.yaml's profiles.
LIMITS = Limits(context=4096, prefill_chunk=1024, decode_batch=4, max_images=8,
                max_patches=4096, max_input_pixels=64_000_000)  # fmt: skip


class RawEngine:
    """An ONNX Runtime session on an exported graph, with the back ends' ``infer``."""

    def __init__(self, path: Path) -> None:
        self.session = session(path)

    def infer(self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]) -> dict:
        return dict(zip(outputs, self.session.run(list(outputs), dict(inputs)), strict=True))


def session(path: Path) -> ort.InferenceSession:
    """A 2-thread CPU session."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class Loop:
    """What the runtime part builds, over the export in ``folder``: the Generator, the
    language engine's runs over ``slots`` cache rows (decode ``batches``, default every size),
    and the Scheduler's engine thread (started; :meth:`close` stops it), ``max_waiting``
    requests waiting at most."""

    def __init__(self, folder: Path, slots: int = 4, batches: Sequence[int] = (),
                 image_cache: int = 0, max_prefill_tokens: int = 8192,
                 max_waiting: int = 1024) -> None:  # fmt: skip
        config = RuntimeConfig.read(folder / "runtime.json")
        self.generator = Generator(
            config, LIMITS, Tokenizer.from_file(str(folder / "tokenizer.json")),
            np.load(folder / "embed_tokens.npy", mmap_mode="r"),
            RawEngine(folder / "qwen2_vl_vision.onnx"), image_cache,
        )  # fmt: skip
        language = OnnxRuntimeEngine(session(folder / "qwen2_vl_language.onnx"))
        batches = list(batches) or list(range(1, slots + 1))
        self.runs = LanguageRuns(language.bind(), config.language, LIMITS.context,
                                 max(batches), "FP32")  # fmt: skip
        self.metrics = GenerationMetrics({"model": "qwen-vl", "version": "1"})
        chunk = LIMITS.prefill_chunk
        self.scheduler = Scheduler(self.generator, self.runs, Slots(slots), chunk,
                                   max_prefill_tokens, self.metrics, max_waiting)  # fmt: skip
        self.scheduler.start(lambda: self.runs.capture(batches))

    def generate(self, req: GenerationRequest) -> list[TokenEvent]:
        """One request through the engine thread: its events, in order."""
        return self.generate_all([req])[0]

    def generate_all(self, reqs: Sequence[GenerationRequest]) -> list[list[TokenEvent]]:
        """Requests submitted at once: each one's events (an engine error is raised)."""
        events: list[list[TokenEvent]] = [[] for _ in reqs]
        done = [threading.Event() for _ in reqs]
        errors: list[BaseException] = []
        for index, req in enumerate(reqs):

            def sink(event: TokenEvent | BaseException, index: int = index) -> None:
                if isinstance(event, BaseException):
                    errors.append(event)
                    done[index].set()
                    return
                events[index].append(event)
                if event.finish_reason:
                    done[index].set()

            self.scheduler.submit(self.generator.prepare(req), sink)
        for flag in done:
            assert flag.wait(300), "the engine thread did not answer"
        if errors:
            raise errors[0]
        return events

    def close(self) -> None:
        """Stop the engine thread."""
        self.scheduler.close(timeout_s=60)


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


@pytest.fixture(scope="session")
def loop(qwen_vl_export: Path) -> Iterator[Loop]:
    """The generation loop on the export, with model.yaml's limits and 4 slots."""
    running = Loop(qwen_vl_export)
    yield running
    running.close()


@pytest.fixture(scope="session")
def generator(loop: Loop) -> Generator:
    """The loop's Generator (request checks, preprocessing, prompt, events)."""
    return loop.generator


@pytest.fixture(scope="session")
def pictures(qwen_vl_pictures: Path) -> dict[str, bytes]:
    """Every fetched picture's encoded bytes by file name."""
    return {path.name: path.read_bytes() for path in sorted(qwen_vl_pictures.iterdir())}
