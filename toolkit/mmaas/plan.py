"""The build plan: a completed ModelSpec -> everything ``docker build`` needs. Pure.

No I/O happens here: the plan lists the files to stage (C14: the context for one model
holds only that model's files), the generated files' text (``build-request.json``), the
template and its values, labels and the image reference, and a digest of all of it. So
``mmaas render`` shows exactly what ``mmaas build`` sends, and a rendered Dockerfile can
be compared byte for byte with a golden file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mmaas.backends import CompileRequest
from mmaas.hashing import bytes_digest
from mmaas.manifest import ModelInfo, TensorInfo
from mmaas.spec import InputSpec, ModelSpec, OutputSpec

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
MODEL_DIR = "/opt/mmaas/model"
# Modules the builder stage runs (``python -m mmaas.stage``): only these are copied into
# it, so a change to the server or CLI does not re-run the engine compile (C13).
STAGE_MODULES = ("__init__.py", "errors.py", "hashing.py", "manifest.py", "datatypes.py",
                 "samples.py", "stage.py", "backends/__init__.py")
LABEL_PREFIX = "io.mmaas"


@dataclass(frozen=True)
class ContextFile:
    """A host file copied into the staged build context at ``target`` (relative path)."""

    source: Path
    target: str


@dataclass(frozen=True)
class BuildPlan:
    """Everything one image build needs.

    Attributes:
        image: ``repository:tag`` of the image.
        template: template file name under ``templates/``.
        values: the template's values (computed here; templates hold no logic).
        files: host files to stage into the context.
        generated: context-relative path -> text of files made for this build.
        labels: OCI + mmaas labels known before the build (the engine hash is added after).
        digest: ``sha256:<hex>`` of all of the above.
    """

    image: str
    template: str
    values: dict[str, Any]
    files: tuple[ContextFile, ...]
    generated: dict[str, str]
    labels: dict[str, str]
    digest: str = ""


def model_info(spec: ModelSpec) -> ModelInfo:
    """The served signature of a completed spec (every tensor has datatype and shape)."""
    return ModelInfo(name=spec.name, version=spec.version, backend=spec.backend,
                     precision=spec.target_precision, max_batch_size=spec.max_batch_size,
                     inputs=tuple(_tensor(t) for t in spec.inputs),
                     outputs=tuple(_tensor(t) for t in spec.outputs))


def make_plan(spec: ModelSpec, source: Path, *, toolkit_dir: Path, buildkit: bool,
              ca_bundle: Path | None = None, external_data: Sequence[str] = ()) -> BuildPlan:
    """Plan the image of a completed ``spec`` whose ONNX file is ``source``.

    Args:
        external_data: the ONNX file's external data locations (relative to its folder,
            nested paths included); staged beside it.
        toolkit_dir: the installed ``mmaas`` package directory (copied into the image).
        buildkit: whether the builder supports ``RUN --mount`` cache mounts.
        ca_bundle: a PEM bundle trusted by pip inside the build, or None.
    """
    compile_ = compile_request(spec, source, Path(MODEL_DIR))
    request = {"model": asdict(compile_.model), "settings": dict(compile_.settings),
               "spec_digest": spec.digest(), "source": f"model/{source.name}"}
    files = [ContextFile(source, f"model/{source.name}"),
             *(ContextFile(source.parent / name, f"model/{name}") for name in external_data),
             ContextFile(TEMPLATES_DIR / "requirements-runtime.txt",
                         "requirements-runtime.txt"),
             *(ContextFile(toolkit_dir / name, f"stage-lib/mmaas/{name}")
               for name in (*STAGE_MODULES, f"backends/{spec.backend}.py")),
             ContextFile(toolkit_dir, "lib/mmaas")]
    if ca_bundle is not None:
        files.append(ContextFile(ca_bundle, "ca-bundle.pem"))
    labels = {
        "org.opencontainers.image.title": spec.name,
        "org.opencontainers.image.version": spec.version,
        "org.opencontainers.image.description": spec.description or f"{spec.name} (mmaas)",
        f"{LABEL_PREFIX}.model.name": spec.name,
        f"{LABEL_PREFIX}.model.version": spec.version,
        f"{LABEL_PREFIX}.backend": spec.backend,
        f"{LABEL_PREFIX}.precision": spec.target_precision,
        f"{LABEL_PREFIX}.spec.digest": request["spec_digest"],
        **spec.image.labels,
    }
    values = {
        "base_image": spec.image.base_image,
        "buildkit": buildkit,
        "ca_bundle": ca_bundle is not None,
        "model_dir": MODEL_DIR,
        "env": runtime_env(spec),
        "ports": [spec.runtime.grpc_port, spec.runtime.metrics_port],
        "labels": labels,
    }
    plan = BuildPlan(image=f"{spec.image_repository}:{spec.image_tag}",
                     template=f"Dockerfile.{spec.backend}.j2", values=values,
                     files=tuple(files),
                     generated={"build-request.json": json.dumps(request, indent=2) + "\n"},
                     labels=labels)
    return BuildPlan(**{**plan.__dict__, "digest": _digest(plan)})


def runtime_env(spec: ModelSpec) -> dict[str, str]:
    """The ``MMAAS_*`` variables that carry ``runtime`` from model.yaml into the image
    (the server reads only its environment; see ``mmaas.server.settings``). An unset
    ``max_message_size`` is left to the server, which derives it from the manifest."""
    env = {"MMAAS_GRPC_PORT": str(spec.runtime.grpc_port),
           "MMAAS_METRICS_PORT": str(spec.runtime.metrics_port),
           "MMAAS_INSTANCE_COUNT": str(spec.runtime.instance_count)}
    if spec.runtime.max_message_size:
        env["MMAAS_MAX_MESSAGE_SIZE"] = str(spec.runtime.max_message_size)
    return env


def compile_request(spec: ModelSpec, source: Path, out_dir: Path) -> CompileRequest:
    """The back end's compile request for a completed ``spec`` whose ONNX file is
    ``source`` (used on the host by ``mmaas serve``; the image gets the same fields as
    ``build-request.json``)."""
    return CompileRequest(model=model_info(spec), source=source, out_dir=out_dir,
                          settings=spec.build.model_dump(mode="json"))


def _tensor(spec: InputSpec | OutputSpec) -> TensorInfo:
    profile = ({"min": spec.min, "opt": spec.opt, "max": spec.max}
               if isinstance(spec, InputSpec) else {})
    return TensorInfo(name=spec.name, datatype=spec.datatype or "FP32",
                      shape=tuple(spec.shape or ()), **profile)


def _digest(plan: BuildPlan) -> str:
    body = {"image": plan.image, "template": plan.template, "values": plan.values,
            "files": [f.target for f in plan.files], "generated": plan.generated,
            "labels": plan.labels}
    return bytes_digest(json.dumps(body, sort_keys=True, default=str).encode())

