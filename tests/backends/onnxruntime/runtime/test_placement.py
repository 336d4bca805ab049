"""Node placement from ONNX Runtime's verbose log (real logs: the H200's qwen-vl session as
exported, and a CPU session logged here), the capture of file descriptor 2 that reads it,
and Triton's nv_gpu_* metrics rendered from NVML readings (a fake NVML: no GPU here)."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import onnxruntime as ort

from mmaas.backends.onnxruntime.runtime.gpu import _inactive
from mmaas.backends.onnxruntime.runtime.placement import Placement, capture_fd2, parse_placement
from mmaas.backends.onnxruntime.runtime.settings import GpuSettings
from mmaas.server.gpu_metrics import open_reader
from onnx_builder import FLOAT, make_onnx
from paths import FIXTURES


def test_the_h200_log_names_the_cpu_nodes_and_the_memcpy_that_block_capture() -> None:
    log = (FIXTURES / "onnxruntime" / "qwen_vision_h200_verbose.log").read_text()
    placement = parse_placement(log)
    assert placement.nodes == {"CPUExecutionProvider": 3, "CUDAExecutionProvider": 178}
    assert placement.cpu_nodes == [
        "Squeeze (node_sym_size_int_19)",
        "Squeeze (node_sym_size_int_20)",
        "Sub (node_sub_20)",
    ]
    assert placement.memcpy == 1
    assert placement.summary().startswith(
        "CPUExecutionProvider 3 (Squeeze (node_sym_size_int_19), Squeeze (node_sym_size_int_20), "
        "Sub (node_sub_20)), CUDAExecutionProvider 178"
    )


def test_a_real_session_log_is_captured_from_fd2_and_other_lines_go_back(tmp_path, capfd) -> None:
    path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [2, 2])])
    options = ort.SessionOptions()
    options.log_severity_level = 0
    with capture_fd2() as captured:
        os.write(2, b"a line of our own\n")
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    assert parse_placement(captured.text).nodes == {"CPUExecutionProvider": 1}
    assert "VerifyEachNodeIsAssignedToAnEp" in captured.text
    assert "a line of our own\n" in capfd.readouterr().err
    assert sys.stderr.writable()


def test_a_session_that_fell_back_to_the_cpu_is_named_with_the_logged_reason(tmp_path) -> None:
    path = make_onnx(tmp_path / "m.onnx", [("x", FLOAT, [2, 2])])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    log = (
        "2026-12-01 10:00:00.1 [E:onnxruntime:Default, provider_bridge_ort.cc:2203 "
        "TryGetProviderInfo_CUDA] Failed to load library libonnxruntime_providers_cuda.so "
        "with error: libcudnn.so.9: cannot open shared object file\n"
    )
    placement = parse_placement(log)
    reason = _inactive(session, GpuSettings("cuda", False, (), "default", False), placement)
    assert reason == (
        "CUDAExecutionProvider is not active (the session runs on CPUExecutionProvider): "
        "Failed to load library libonnxruntime_providers_cuda.so with error: libcudnn.so.9: "
        "cannot open shared object file"
    )
    assert _inactive(
        session, GpuSettings("cuda", False, (), "default", False), Placement()
    ).endswith("ONNX Runtime logged no reason")


class FakeNvml:
    """NVML's Python API as pynvml exposes it, for two GPUs (no GPU exists here)."""

    class NotSupported(Exception):
        pass

    def nvmlInit(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return {"GPU-a": 0, "MIG-b": 1}[uuid]

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return [b"GPU-a", b"MIG-b"][handle]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=150754820096, used=2528580000 + handle, free=0)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        if handle == 1:
            raise self.NotSupported  # a MIG instance has no utilization of its own
        return SimpleNamespace(gpu=67, memory=22)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 330000

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 700000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return 5000


def test_nv_gpu_metrics_by_uuid_from_a_fake_nvml_no_gpu_here() -> None:
    reader = open_reader("", FakeNvml())
    assert reader is not None and reader.exposition() == []  # CUDA_VISIBLE_DEVICES=""
    text = "\n".join(open_reader("GPU-a,MIG-b", FakeNvml()).exposition())  # type: ignore[union-attr]
    assert 'nv_gpu_utilization{gpu_uuid="GPU-a"} 0.67' in text
    assert 'gpu_uuid="MIG-b"} 0.' not in text.split("nv_gpu_memory_total_bytes")[0]
    assert 'nv_gpu_memory_total_bytes{gpu_uuid="MIG-b"} 150754820096' in text
    assert 'nv_gpu_power_usage{gpu_uuid="GPU-a"} 330' in text
    assert 'nv_gpu_power_limit{gpu_uuid="GPU-a"} 700' in text
    assert 'nv_energy_consumption{gpu_uuid="GPU-a"} 0' in text
    assert "# TYPE nv_gpu_memory_used_bytes gauge" in text
    everything = open_reader(None, FakeNvml())
    assert everything is not None and [uuid for _, uuid in everything.devices] == ["GPU-a", "MIG-b"]
    assert open_reader(None, SimpleNamespace()) is None  # no NVML: no GPU metrics
