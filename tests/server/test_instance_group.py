"""Triton's ``instance_group`` of a served model tells where its loaded instances run
(:func:`mmaas.server.models.runs_on`): GPU instances give ``KIND_GPU`` with their GPUs
(``gpus: [0]``), CPU ones or engines that say nothing keep the back end's kind. The GPU
case served for real: tests/backends/onnxruntime/runtime/test_gpu.py on the H200."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from mmaas.backends import Batch, Device
from mmaas.server.metrics import ModelMetrics
from mmaas.server.models import runs_on
from mmaas.server.protocol.messages import to_model_config
from mmaas.server.repository import ConfigFacts, ServedModel

from .test_streaming import served

FACTS = ConfigFacts(
    platform="onnxruntime_onnx", device_kind="CPU", instance_count=2, batching=False
)


class Instance:
    """An engine that reports where it runs (the BatchingEngine protocol)."""

    def __init__(self, device: Device) -> None:
        self.runs_on = device
        self.device_inputs = device.kind == "GPU"
        self.executor = ThreadPoolExecutor(1)

    def infer(self, inputs, outputs):
        return {}

    def infer_batch(self, parts, outputs) -> Batch:
        return Batch([{} for _ in parts])


class Plain:
    """An engine that says nothing about its device."""

    def infer(self, inputs, outputs):
        return {}


def config_of(facts: ConfigFacts):
    model = served(None)
    return to_model_config(ServedModel(model.info, 0, ModelMetrics("m", "1"), facts))


def test_gpu_instances_are_kind_gpu_with_their_gpus() -> None:
    facts = runs_on(FACTS, [Instance(Device("GPU", (0,))), Instance(Device("GPU", (0,)))])
    (group,) = config_of(facts).instance_group
    assert (group.kind, list(group.gpus), group.count) == (group.KIND_GPU, [0], 2)


def test_cpu_mixed_or_silent_instances_keep_what_is_known() -> None:
    cpu = runs_on(FACTS, [Instance(Device("CPU"))])
    assert (cpu.device_kind, cpu.gpus) == ("CPU", ())
    mixed = [Instance(Device("GPU", (0,))), Instance(Device("CPU"))]
    assert runs_on(FACTS, mixed) == FACTS
    assert runs_on(FACTS, [Instance(Device("GPU", (0,))), Plain()]) == FACTS
    (group,) = config_of(FACTS).instance_group
    assert (group.kind, list(group.gpus)) == (group.KIND_CPU, [])
