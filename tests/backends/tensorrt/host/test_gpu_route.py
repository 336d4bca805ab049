"""The GPU route's checks and labels around the compile: the image labels the GPU build adds
from ``manifest.backend`` (C12), from a fake GPU description (the boundary that cannot
exist here), and the per-target tag of ``build.tensorrt.gpu_targets``."""

from __future__ import annotations

import pytest

from mmaas.backends.tensorrt.host.gpu_route import target_tag, tensorrt_labels
from mmaas.core.errors import BuildError
from mmaas.core.manifest import FileRecord, Manifest, ModelInfo, TensorInfo

DET = ModelInfo("det", "1", "tensorrt", "fp16", 0, (TensorInfo("x", "FP32", (1, 3)),), ())


def test_fake_gpu_facts_become_image_labels() -> None:
    record = FileRecord("model.plan", "blake3:0", "sha256:0", 1)
    facts = {
        "name": "tensorrt",
        "version": "10.13.2.6",
        "gpu": {"name": "NVIDIA A10", "compute_capability": "8.6"},
        "driver_version": "580.65.06",
        "cuda_version": "13.0.0",
        "min_driver": "580.65.06",
    }
    manifest = Manifest(DET, record, record, "sha256:0", facts, {})
    assert tensorrt_labels(manifest) == {
        "io.mmaas.tensorrt.version": "10.13.2.6",
        "io.mmaas.cuda.version": "13.0.0",
        "io.mmaas.driver.min": "580.65.06",
        "io.mmaas.gpu.name": "NVIDIA A10",
        "io.mmaas.gpu.compute_capability": "8.6",
        "io.mmaas.gpu.target": "sm86",
    }
    unknown = Manifest(
        DET, record, record, "sha256:0", {**facts, "gpu": None, "min_driver": None}, {}
    )
    assert set(tensorrt_labels(unknown)) == {"io.mmaas.tensorrt.version", "io.mmaas.cuda.version"}


def test_gpu_target_tag_needs_this_gpu_among_the_targets() -> None:
    assert target_tag("mmaas/det:1.0.0", "8.6", []) is None
    assert target_tag("mmaas/det:1.0.0", "8.6", ["sm80", "sm86"]) == "mmaas/det:1.0.0-sm86"
    with pytest.raises(BuildError, match=r"GPU is sm75, but build\.tensorrt\.gpu_targets"):
        target_tag("mmaas/det:1.0.0", "7.5", ["sm80", "sm90"])
