"""Triton's GPU metrics from NVML (``nvidia-ml-py``'s ``pynvml``), labelled by GPU UUID.

Names, units and label as Triton's metrics documentation gives them: gauges
``nv_gpu_utilization`` (0.0 to 1.0), ``nv_gpu_memory_total_bytes``,
``nv_gpu_memory_used_bytes``, ``nv_gpu_power_usage`` and ``nv_gpu_power_limit`` (watts),
and the counter ``nv_energy_consumption`` (joules since the server started), each with
``gpu_uuid="GPU-..."`` (or ``MIG-...``). A reading the device does not support (a MIG
instance has no utilization or power of its own) is left out. Only the devices this
process may use are read: ``CUDA_VISIBLE_DEVICES`` (indices or full ``GPU-``/``MIG-``
UUIDs; unset = all, empty = none). Without pynvml or a driver there are no GPU
metrics (the CPU image has neither).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import Any

from mmaas.server.cpu_metrics import format_value

_state: dict[str, Any] = {}
_lock = threading.Lock()


class GpuReader:
    """The visible devices' NVML handles, their UUIDs and the energy reading at start."""

    def __init__(self, nvml: Any, visible: str | None) -> None:
        self.nvml = nvml
        self.devices = [
            (handle, _text(nvml.nvmlDeviceGetUUID(handle))) for handle in _handles(nvml, visible)
        ]
        self.energy_start = {
            uuid: _read(nvml.nvmlDeviceGetTotalEnergyConsumption, h) for h, uuid in self.devices
        }

    def exposition(self) -> list[str]:
        """The metric families' lines in the Prometheus text format (none: no visible GPU)."""
        nvml = self.nvml
        rows: dict[str, list[tuple[str, float]]] = {}
        for handle, uuid in self.devices:
            memory = _read(nvml.nvmlDeviceGetMemoryInfo, handle)
            util = _read(nvml.nvmlDeviceGetUtilizationRates, handle)
            power = _read(nvml.nvmlDeviceGetPowerUsage, handle)
            limit = _read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            energy = _read(nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
            start = self.energy_start.get(uuid)
            values = {
                "nv_gpu_utilization": None if util is None else util.gpu / 100.0,
                "nv_gpu_memory_total_bytes": None if memory is None else float(memory.total),
                "nv_gpu_memory_used_bytes": None if memory is None else float(memory.used),
                "nv_gpu_power_usage": None if power is None else power / 1000.0,
                "nv_gpu_power_limit": None if limit is None else limit / 1000.0,
                "nv_energy_consumption": None
                if energy is None or start is None
                else (energy - start) / 1000.0,
            }
            for name, value in values.items():
                if value is not None:
                    rows.setdefault(name, []).append((uuid, value))
        lines: list[str] = []
        for name, (kind, doc) in FAMILIES.items():
            if name in rows:
                lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
                lines += [
                    f'{name}{{gpu_uuid="{uuid}"}} {format_value(value)}'
                    for uuid, value in rows[name]
                ]
        return lines


FAMILIES = {
    "nv_gpu_utilization": ("gauge", "GPU utilization rate [0.0 - 1.0)"),
    "nv_gpu_memory_total_bytes": ("gauge", "GPU total memory, in bytes"),
    "nv_gpu_memory_used_bytes": ("gauge", "GPU used memory, in bytes"),
    "nv_gpu_power_usage": ("gauge", "GPU power usage in watts"),
    "nv_gpu_power_limit": ("gauge", "GPU power management limit in watts"),
    "nv_energy_consumption": (
        "counter",
        "GPU energy consumption in joules since the server started",
    ),
}


def lines() -> list[str]:
    """The GPU metric families of this process's GPUs (a metrics family of
    :func:`mmaas.server.metrics.serve_http`), none without NVML (opened once, on the first
    call; a failure is remembered and not retried)."""
    with _lock:
        if "reader" not in _state:
            _state["reader"] = open_reader()
    reader = _state["reader"]
    return [] if reader is None else reader.exposition()


def open_reader(visible: str | None = None, nvml: Any = None) -> GpuReader | None:
    """A :class:`GpuReader` over pynvml (or ``nvml``), None when NVML cannot start here.
    ``visible`` defaults to ``CUDA_VISIBLE_DEVICES``."""
    try:
        library = nvml if nvml is not None else importlib.import_module("pynvml")
        library.nvmlInit()
        return GpuReader(
            library, os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
        )
    except Exception:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded...
        return None


def _handles(nvml: Any, visible: str | None) -> list[Any]:
    if visible is None:
        return [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    handles = []
    for entry in (part.strip() for part in visible.split(",")):
        if not entry:
            continue
        if entry.isdigit():
            handles.append(nvml.nvmlDeviceGetHandleByIndex(int(entry)))
        else:
            handles.append(nvml.nvmlDeviceGetHandleByUUID(entry))
    return handles


def _read(call: Callable[..., Any], handle: Any) -> Any:
    try:
        return call(handle)
    except Exception:  # NVMLError_NotSupported on a MIG instance, and the like
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
