"""The engine-cache key: a digest of everything that determines an engine and its gates.

``key = sha256(canonical JSON of {engine_spec, files, backend, builder_image, hardware})``:

* ``engine_spec``: the engine request (:func:`engine_spec`: signature and profile,
  precision, the back end's own engine settings, the ``checks`` gates), so name, version,
  description, runtime settings and image labels do not count;
* ``files``: sha256 of every engine input as staged (:func:`mmaas.build.plan.engine_inputs`:
  the ONNX file, its external data, the accuracy samples) and of the builder stage's
  mmaas wheel (the stage and the back end's packages only);
* ``backend``: its name and pinned version (``onnxruntime==`` in
  ``templates/image-constraints.txt``; ``build.tensorrt.version``);
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmaas.backends import get_target
from mmaas.backends.targets import ContextFile
from mmaas.build import docker as docker_engine
from mmaas.build.plan import ContextWheel
from mmaas.build.requests import engine_request
from mmaas.build.wheel import package_files
from mmaas.core.errors import DockerError
from mmaas.core.hashing import bytes_digest, file_digests
from mmaas.spec.model import ModelSpec


def engine_key(
    spec_part: dict[str, Any],
    files: Sequence[ContextFile | ContextWheel],
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
        "files": {f.target: content_digest(f) for f in files},
    }
    return bytes_digest(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def content_digest(item: ContextFile | ContextWheel) -> str:
    """sha256 of a staged file's bytes, or of a wheel's files (names and bytes)."""
    if isinstance(item, ContextFile):
        return file_digests(item.source)["sha256"]
    entries = package_files(item.packages, item.root)
    return bytes_digest(json.dumps([[name, bytes_digest(data)] for name, data in entries]).encode())


def key_for(
    spec: ModelSpec, source: Path, files: Sequence[ContextFile | ContextWheel]
) -> str | None:
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


def engine_spec(spec: ModelSpec, source: Path) -> dict[str, Any]:
    """The engine request of ``spec`` without its key, as JSON data: what of the spec
    determines the engine (:func:`mmaas.build.requests.engine_request`)."""
    data: dict[str, Any] = json.loads(engine_request(spec, source, None).to_json())
    return data


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
    """The image the builder stage starts from (the back end's build target says)."""
    return get_target(spec.backend).builder_image(spec)


def backend_pin(spec: ModelSpec) -> dict[str, str]:
    """``{"name", "version"}`` of the back end the builder stage runs."""
    return get_target(spec.backend).pin(spec)


def hardware_class(spec: ModelSpec) -> dict[str, Any]:
    """What the engine is tied to on this host (the back end's build target says: CPU
    architecture and vector extensions, or the GPU's compute capability)."""
    return get_target(spec.backend).hardware_class(spec)
