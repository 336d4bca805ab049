"""The engine-cache key: a digest of everything that determines an engine and its gates.

``key = sha256(canonical JSON of {engine_spec, files, backend, builder_image, hardware})``:

* ``engine_spec``: the build-relevant part of the spec (:func:`mmaas.build.plan.engine_spec`:
  signature and profile, precision, the back end's own build settings, the ``checks``
  gates), so name, version, description, runtime settings and image labels do not count;
* ``files``: sha256 of every engine input as staged (:func:`mmaas.build.plan.engine_inputs`:
  the ONNX file, its external data, the accuracy samples, the builder stage's mmaas code);
* ``backend``: its name and pinned version (``onnxruntime==`` in
  ``templates/requirements-runtime.txt``; ``build.tensorrt.version``);
* ``builder_image``: the content of the image the builder stage starts from
  (``image.base_image`` on CPU, ``build.tensorrt.builder_image`` on GPU): a digest of its
  layers (``RootFS.Layers``), environment, platform and user (:func:`image_content`), so
  a rebuilt base with other files changes the key while a label-only change does not;
* ``hardware``: the class of machine the engine is tied to: CPU architecture, plus the
  vector extensions ONNX Runtime's level ``all`` layouts depend on; GPU compute
  capability for TensorRT.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmaas.build import docker as docker_engine
from mmaas.build.plan import TEMPLATES_DIR, ContextFile, engine_spec
from mmaas.core.errors import DockerError
from mmaas.core.hashing import bytes_digest, file_digests
from mmaas.spec.model import ModelSpec

PIN = re.compile(r"^onnxruntime==(\S+)\s*$", re.MULTILINE)


def engine_key(
    spec_part: dict[str, Any],
    files: Sequence[ContextFile],
    backend: dict[str, str],
    builder_image: str,
    hardware: dict[str, Any],
) -> str:
    """``sha256:<hex>`` over the canonical JSON of the parts (see the module docstring).

    Raises:
        OSError: an engine input file cannot be read.
    """
    body = {
        "engine_spec": spec_part,
        "backend": backend,
        "builder_image": builder_image,
        "hardware": hardware,
        "files": {f.target: file_digests(f.source)["sha256"] for f in files},
    }
    return bytes_digest(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def key_for(spec: ModelSpec, source: Path, files: Sequence[ContextFile]) -> str | None:
    """The key of a build of ``spec`` on this host, or None when the builder stage's base
    image is not in the local engine yet (nothing can be cached against an unknown image).

    Raises:
        DockerError: no Docker engine.
    """
    docker_engine.client()  # raises DockerError without an engine
    try:
        content = image_content(docker_engine.inspect_image(builder_image(spec)))
    except DockerError:  # not pulled or made yet
        return None
    return engine_key(
        engine_spec(spec, source), files, backend_pin(spec), content, hardware_class(spec)
    )


def image_content(inspected: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of what of an image can change an engine built on it: its layers'
    diff ids, ``Env``, ``User``, ``Os`` and ``Architecture`` (``docker image inspect``);
    labels and other metadata do not count."""
    config = inspected.get("Config") or {}
    body = {
        "layers": (inspected.get("RootFS") or {}).get("Layers", []),
        "env": config.get("Env") or [],
        "user": config.get("User") or "",
        "platform": [inspected.get("Os"), inspected.get("Architecture")],
    }
    return bytes_digest(json.dumps(body, sort_keys=True).encode())


def builder_image(spec: ModelSpec) -> str:
    """The image the builder stage starts from."""
    return (
        spec.build.tensorrt.builder_image if spec.backend == "tensorrt" else spec.image.base_image
    )


def backend_pin(spec: ModelSpec, requirements: Path | None = None) -> dict[str, str]:
    """``{"name", "version"}`` of the back end the builder stage runs: TensorRT's pin from
    the spec, ONNX Runtime's from ``requirements`` (default the runtime requirements)."""
    if spec.backend == "tensorrt":
        return {"name": "tensorrt", "version": spec.build.tensorrt.version}
    text = (requirements or TEMPLATES_DIR / "requirements-runtime.txt").read_text()
    found = PIN.search(text)
    return {"name": "onnxruntime", "version": found.group(1) if found else "unpinned"}


def hardware_class(spec: ModelSpec) -> dict[str, Any]:
    """What the engine is tied to on this host: ``{"arch"}`` plus ``"cpu_flags"`` (ONNX
    Runtime at level ``all``: the kernel vector extensions this CPU has), or
    ``{"compute_capability"}`` of the first GPU for TensorRT (``"none"`` without one)."""
    if spec.backend == "tensorrt":
        from mmaas.backends.tensorrt.gpu import query_gpus

        gpus = query_gpus().gpus
        return {"compute_capability": gpus[0].compute_capability if gpus else "none"}
    from mmaas.backends.onnxruntime.backend import OnnxRuntimeBackend

    cpu = OnnxRuntimeBackend().describe()["cpu"]
    if spec.build.onnxruntime.graph_optimization_level != "all":
        return {"arch": cpu["arch"]}
    return {"arch": cpu["arch"], "cpu_flags": cpu["flags"]}
