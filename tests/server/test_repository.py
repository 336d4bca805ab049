"""The model repository: several named models in one server, each with its own signature,
request path, readiness, statistics and metrics labels; unknown names NOT_FOUND.

The two-model server here is assembled in-process from the real parts (two model
directories compiled by the builder stage, the back end's loader, the batcher, the gRPC
server, the metrics endpoint) and answered with the real client (tritonclient.grpc); a
multi-engine image serves the same way end to end in tests/build/test_multi_engine.py.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from grpc_health.v1._async import HealthServicer
from tritonclient.utils import InferenceServerException

from mmaas.core.manifest import ModelInfo, read_manifest
from mmaas.server import runtime
from mmaas.server.batcher import Scheduler
from mmaas.server.context import ServerContext
from mmaas.server.grpc.server import grpc_server
from mmaas.server.metrics import ModelMetrics, serve_http
from mmaas.server.repository import ConfigFacts, Repository, ServedModel
from mmaas.server.settings import Settings
from mmaas.server.status import NotFound

from .conftest import free_ports


def served(info: ModelInfo, state: str = "loading", number: int = 1) -> ServedModel:
    facts = ConfigFacts("onnxruntime_onnx", "CPU", 1, batching=False)
    metrics = ModelMetrics(info.name, str(number))
    return ServedModel(info, 1 << 26, metrics, facts, state=state, number=number)


def info(name: str, version: str = "1") -> ModelInfo:
    return ModelInfo(name, version, "onnxruntime", "fp32", 0, (), ())


def test_lookup_by_name_and_version_lists_what_is_served() -> None:
    a1, a2, b = served(info("a", "1")), served(info("a", "2"), number=2), served(info("b"))
    repository = Repository([a1, a2, b])
    assert repository.get("a") is a2 and repository.get("a", "1") is a1
    assert repository.get("b", "") is b and len(repository) == 3
    with pytest.raises(NotFound, match=r"unknown model 'c' .*'a' \(version '1'\), 'a' "):
        repository.get("c")
    with pytest.raises(NotFound, match=r"has no version '3' .* version '1', '2'"):
        repository.get("a", "3")
    with pytest.raises(ValueError, match="registered twice"):
        repository.add(served(info("b")))


def test_ready_only_when_every_model_has_an_executor_and_is_ready() -> None:
    a, b = served(info("a")), served(info("b"))
    repository = Repository([a, b])
    assert not Repository().ready and not repository.ready
    repository.set_state("ready")
    assert not a.ready  # no executor yet
    a.executor = b.executor = Scheduler([object()], 0, Settings().batching, a.metrics)  # type: ignore[list-item]
    assert repository.ready
    repository.set_state("draining")
    assert not repository.ready and not b.ready


class InProcessServer:
    """Two compiled model directories served by one gRPC server on an event loop thread."""

    def __init__(self, model_dirs: list[Path]) -> None:
        self.port, self.metrics_port = free_ports(2)
        self.settings = Settings(host="127.0.0.1", grpc_port=self.port, warmup_runs=0)
        self.manifests = [read_manifest(directory) for directory in model_dirs]
        self.dirs = model_dirs
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.main(),))

    async def main(self) -> None:
        self.repository = Repository(served(m.model) for m in self.manifests)
        context = ServerContext.create(self.repository)
        server = grpc_server(self.settings, context, HealthServicer())
        metrics = serve_http("127.0.0.1", self.metrics_port, self.repository.metrics)
        await server.start()
        self.stop = asyncio.Event()
        schedulers = []
        for directory, manifest in zip(self.dirs, self.manifests, strict=True):
            model = self.repository.get(manifest.model.name)
            engines = runtime.load_instances(self.settings, directory, manifest)
            max_batch = manifest.model.max_batch_size
            model.executor = Scheduler(engines, max_batch, self.settings.batching, model.metrics)
            schedulers.append(model.executor)
            model.executor.start()
        self.repository.set_state("ready")
        self.started.set()
        await self.stop.wait()
        for scheduler in schedulers:
            await scheduler.close()
        await server.stop(0)
        metrics.shutdown()

    def __enter__(self) -> InProcessServer:
        self.thread.start()
        assert self.started.wait(60), "the in-process server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)

    def client(self) -> triton.InferenceServerClient:
        return triton.InferenceServerClient(f"127.0.0.1:{self.port}")

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return str(reply.read().decode())


@pytest.fixture(scope="module")
def two_models(det_dir: Path, cls_dir: Path) -> Iterator[InProcessServer]:
    with InProcessServer([det_dir, cls_dir]) as server:
        yield server


def tensor(name: str, array: np.ndarray) -> triton.InferInput:
    infer_input = triton.InferInput(name, list(array.shape), "FP32")
    infer_input.set_data_from_numpy(array)
    return infer_input


def test_each_model_answers_with_its_own_signature(
    two_models: InProcessServer, ppocr_models: dict[str, Path]
) -> None:
    client = two_models.client()
    assert client.is_server_ready()
    assert client.is_model_ready("ppocr-det") and client.is_model_ready("ppocr-cls")
    det_meta, cls_meta = (
        client.get_model_metadata("ppocr-det"),
        client.get_model_metadata("ppocr-cls"),
    )
    assert det_meta.outputs[0].name == "sigmoid_0.tmp_0"
    assert cls_meta.outputs[0].name == "save_infer_model/scale_0.tmp_1"
    assert client.get_model_config("ppocr-cls").config.max_batch_size == 32
    rng = np.random.default_rng(7)
    for name, shape in (("ppocr-det", (1, 3, 64, 96)), ("ppocr-cls", (2, 3, 48, 192))):
        array = rng.random(shape, dtype=np.float32)
        result = client.infer(name, [tensor("x", array)])
        assert result.get_response().model_name == name
        session = ort.InferenceSession(str(ppocr_models[name]), providers=["CPUExecutionProvider"])
        (want,) = session.run(None, {"x": array})
        (output,) = (o.name for o in (det_meta if name == "ppocr-det" else cls_meta).outputs)
        np.testing.assert_allclose(result.as_numpy(output), want, atol=1e-4)


def test_a_request_is_checked_against_its_model_and_unknown_names_are_not_found(
    two_models: InProcessServer,
) -> None:
    client = two_models.client()
    det_shape = tensor("x", np.zeros((1, 3, 64, 96), np.float32))
    with pytest.raises(InferenceServerException) as error:
        client.infer("ppocr-cls", [det_shape])
    assert error.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "axis 2 is 64, allowed 48" in error.value.message()  # the classifier's profile
    with pytest.raises(InferenceServerException) as error:
        client.infer("ocr", [det_shape])
    assert error.value.status() == "StatusCode.NOT_FOUND"
    served = "'ppocr-det' (version '1' or '1.0.0'), 'ppocr-cls' (version '1' or '1.0.0')"
    assert served in error.value.message()
    with pytest.raises(InferenceServerException) as error:
        client.get_model_config("ppocr-det", "2")
    assert error.value.status() == "StatusCode.NOT_FOUND"


def test_statistics_and_metrics_are_kept_per_model(two_models: InProcessServer) -> None:
    client = two_models.client()

    def count(name: str) -> int:
        return int(client.get_inference_statistics(name).model_stats[0].inference_count)

    det_before, cls_before = count("ppocr-det"), count("ppocr-cls")
    client.infer("ppocr-cls", [tensor("x", np.zeros((3, 3, 48, 192), np.float32))])
    assert (count("ppocr-det"), count("ppocr-cls")) == (det_before, cls_before + 3)
    every = client.get_inference_statistics().model_stats
    assert [s.name for s in every] == ["ppocr-det", "ppocr-cls"]
    text = two_models.metrics()
    assert text.count("# TYPE nv_inference_count counter") == 1
    samples = [line for line in text.splitlines() if line.startswith("nv_inference_count{")]
    assert samples == [
        f'nv_inference_count{{model="ppocr-det",version="1"}} {det_before}',
        f'nv_inference_count{{model="ppocr-cls",version="1"}} {cls_before + 3}',
    ]
