"""The rendered GPU Dockerfile (templates/Dockerfile.tensorrt.j2) for the real ppocr-det
spec switched to TensorRT: stages, layer order, release checks in both stages, GPU check
before trtexec, non-root, no secrets; linted with hadolint. And the route's docker run."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mmaas.backends.tensorrt.host.image import (
    compile_run_argv,
    tensorrt_plan_values,
)
from mmaas.build.context import TOOLKIT_DIR, package_plan
from mmaas.build.plan import ContextWheel, make_plan
from mmaas.build.render import render_dockerfile
from mmaas.build.spec_checks import host_checks
from mmaas.core import proc
from mmaas.core.errors import SpecError
from mmaas.spec.load import parse_spec
from paths import ROOT

DET = ROOT / "models" / "ppocr-det" / "model.yaml"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def tensorrt_spec(extra: str = ""):
    text = DET.read_text().replace("backend: onnxruntime", "backend: tensorrt")
    text = text.replace("target_precision: fp32", "target_precision: fp16") + extra
    return parse_spec(text, DET, checks=host_checks())


def rendered(
    ppocr_models: dict[str, Path],
    *,
    buildkit: bool = True,
    ca: bool = False,
    phase: str = "package",
    extra: str = "",
) -> str:
    loaded = tensorrt_spec(extra)
    bundle = DET if ca else None
    if phase == "package":
        plan = package_plan(loaded, {"model": None}, {"model": Path("engine")}, bundle, buildkit)
    else:
        plan = make_plan(
            loaded.engines[0].spec,
            loaded.source_path,
            toolkit_dir=TOOLKIT_DIR,
            buildkit=buildkit,
            ca_bundle=bundle,
        )
    return render_dockerfile(plan)


def instructions(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"^[A-Z]+ ", line)]


def test_stages_and_layer_order(ppocr_models: dict[str, Path]) -> None:
    text = rendered(ppocr_models)
    assert [line for line in instructions(text) if line.startswith("FROM ")] == [
        "FROM nvcr.io/nvidia/tensorrt:25.08-py3 AS builder",
        "FROM nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04 AS framework",
        "FROM framework AS serving",
        "FROM framework AS sbom-tool",
        "FROM serving AS sbom",
        "FROM serving AS runtime",
    ]
    builder = text[: text.index("AS framework")]
    assert "COPY model/" not in builder and "ENTRYPOINT" not in builder  # no compile here
    assert builder.index("COPY engine/ /opt/mmaas/engine/") < builder.index(
        "RUN python -m mmaas.stage stamp /opt/mmaas/build/build-request.json"
    )
    runtime = text[text.index("AS serving") :]  # serving, its SBOM stages, then runtime
    framework = text[text.index("AS framework") : text.index("AS serving")]
    assert "tensorrt-pin.txt" in framework and "preflight --tensorrt 10.13" in runtime
    order = [
        runtime.index(s)
        for s in (
            "COPY --from=builder /opt/mmaas/engine/ /opt/mmaas/model/",
            "COPY wheels/runtime/",
            "COPY --from=builder /opt/mmaas/model/manifest.json",
            "mmaas.core.model_dir /opt/mmaas/model",
            "mmaas.core.image_seal /opt/mmaas/model /opt/mmaas",
            "LABEL",
            "USER 10001",
        )
    ]
    assert order == sorted(order)
    assert instructions(text)[-2:] == [
        "USER 10001",
        'ENTRYPOINT ["python", "-I", "-B", "-u", "-m", "mmaas.server"]',
    ]


def test_compile_build_is_the_builder_stage_and_checks_gpu_before_trtexec(ppocr_models) -> None:
    compile_text = rendered(ppocr_models, phase="compile")
    package_text = rendered(ppocr_models)
    assert [line for line in instructions(compile_text) if line.startswith("FROM ")] == [
        "FROM nvcr.io/nvidia/tensorrt:25.08-py3 AS builder"
    ]
    entry = instructions(compile_text)[-1]
    assert entry.startswith("ENTRYPOINT ")
    assert entry.index("preflight --tensorrt 10.13 --gpu &&") < entry.index(
        "python -m mmaas.stage build /opt/mmaas/build/engine-request.json /opt/mmaas/out/engine"
    )
    preflight = "python -m mmaas.backends.tensorrt.runtime.preflight preflight --tensorrt 10.13"
    assert f"RUN {preflight} \\" in compile_text
    assert "MMAAS_TIMING_CACHE_DIR=/opt/mmaas/timing-cache" in compile_text
    assert "--mount=type=cache,target=/root/.cache/pip" in compile_text
    assert "LABEL" not in compile_text  # runtime settings and labels never touch the compile

    def shared(text: str) -> list[str]:  # the builder layers both builds reuse
        body = instructions(text)
        return body[: body.index("COPY wheels/builder/ /opt/mmaas/wheels/builder/") + 2]

    assert shared(compile_text) == shared(package_text)


def test_plan_stages_tensorrt_modules_requirements_and_calibration_cache(
    ppocr_models, tmp_path: Path
) -> None:
    calibration = tmp_path / "calib.cache"
    calibration.write_bytes(b"TRT-8601-EntropyCalibration2\n")
    loaded = tensorrt_spec()
    spec = loaded.spec.model_copy(
        update={
            "build": loaded.spec.build.model_copy(
                update={
                    "tensorrt": loaded.spec.build.tensorrt.model_copy(
                        update={"calibration_cache": "calib.cache"}
                    )
                }
            )
        }
    )
    compile_plan = make_plan(
        spec, loaded.source_path, toolkit_dir=TOOLKIT_DIR, buildkit=True, model_dir=tmp_path
    )
    targets = {f.target: f.source for f in compile_plan.files}
    assert targets["model/calib.cache"] == calibration
    builder = (
        "mmaas.core",
        "mmaas.stage",
        "mmaas.backends.tensorrt.builder",
        "mmaas.backends.tensorrt.runtime",
    )
    assert compile_plan.wheels == (ContextWheel(TOOLKIT_DIR, builder, "wheels/builder"),)
    for package in builder:
        assert TOOLKIT_DIR.joinpath(*package.split(".")[1:], "__init__.py").is_file()
    for name in ("onnx>=", "onnxconverter-common>=", "filelock>=", "onnxruntime>="):
        assert name in compile_plan.generated["requirements-builder.txt"]
    assert compile_plan.values["tensorrt_version"] == "10.13"
    assert set(compile_plan.generated) == {
        "engine-request.json",
        "image-constraints.txt",
        "requirements-builder.txt",
        "requirements-runtime.txt",
    }
    calibrated = replace(loaded, spec=spec)
    package = package_plan(calibrated, {"model": None}, {"model": tmp_path / "engine"}, None, True)
    staged = {f.target for f in package.files}
    assert "model/calib.cache" not in staged and "engine" in staged
    runtime = ("mmaas.core", "mmaas.server", "mmaas.backends.tensorrt.runtime")
    assert [w.packages for w in package.wheels] == [builder, runtime]
    # the TensorRT runtime image carries no build-only dependency
    needs = package.generated["requirements-runtime.txt"]
    assert "onnx" not in needs and "filelock" not in needs and "grpcio>=" in needs


def test_no_secrets_and_labels(ppocr_models: dict[str, Path]) -> None:
    text = rendered(ppocr_models, ca=True)
    assert not re.search(r"(?i)(password|token|secret|api[_-]?key)\s*=", text)
    assert '"io.mmaas.backend"="tensorrt"' in text and '"io.mmaas.precision"="fp16"' in text
    assert text.count("COPY ca-bundle.pem /opt/mmaas/ca-bundle.pem") == 2


@pytest.mark.parametrize("phase", ["compile", "package"])
@pytest.mark.parametrize("buildkit", [True, False], ids=["buildkit", "legacy"])
def test_rendered_dockerfile_passes_hadolint(
    ppocr_models, tmp_path: Path, buildkit: bool, phase: str
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(rendered(ppocr_models, buildkit=buildkit, phase=phase))
    if not buildkit:
        assert "--mount=type=cache" not in dockerfile.read_text()
    result = proc.run([HADOLINT, "--no-color", str(dockerfile)], check=False, what="hadolint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_values_refuse_a_builder_image_of_another_release() -> None:
    loaded = tensorrt_spec("build:\n  tensorrt:\n    builder_image: example/tensorrt:10.9.0-py3\n")
    with pytest.raises(SpecError) as caught:
        tensorrt_plan_values(loaded.spec)
    assert (
        "build.tensorrt.builder_image: example/tensorrt:10.9.0-py3 is TensorRT 10.9.0, "
        "but build.tensorrt.version is 10.13" in str(caught.value)
    )


def test_values_and_compile_run_argv(tmp_path: Path) -> None:
    values = tensorrt_plan_values(tensorrt_spec().spec)
    assert values == {
        "builder_image": "nvcr.io/nvidia/tensorrt:25.08-py3",
        "runtime_image": "nvcr.io/nvidia/cuda:13.0.0-runtime-ubuntu24.04",
        "tensorrt_version": "10.13",
        "timing_cache_dir": "/opt/mmaas/timing-cache",
        "out_dir": "/opt/mmaas/out",
        "gpu_route": "docker-run",
        "gpu_targets": [],
    }
    assert compile_run_argv(
        ["docker"], "mmaas/det:1.0.0-builder", tmp_path / "c", tmp_path / "o", "1000:1000"
    ) == [
        "docker",
        "run",
        "--rm",
        "--gpus",
        "all",
        "--user",
        "1000:1000",
        "--volume",
        f"{tmp_path}/c:/opt/mmaas/timing-cache",
        "--volume",
        f"{tmp_path}/o:/opt/mmaas/out",
        "mmaas/det:1.0.0-builder",
    ]
    assert (TOOLKIT_DIR / "backends" / "tensorrt" / "host" / "gpu_route.py").is_file()


def test_values_check_gpu_targets() -> None:
    loaded = tensorrt_spec("build:\n  tensorrt:\n    gpu_targets: [sm86, sm90]\n")
    assert tensorrt_plan_values(loaded.spec)["gpu_targets"] == ["sm86", "sm90"]
    bad = tensorrt_spec("build:\n  tensorrt:\n    gpu_targets: [sm86, ampere]\n")
    fp8 = parse_spec(
        DET.read_text()
        .replace("backend: onnxruntime", "backend: tensorrt")
        .replace("target_precision: fp32", "target_precision: fp8")
        + "build:\n  tensorrt:\n    gpu_targets: [sm86, sm90]\n",
        DET,
        checks=host_checks(),
    )
    with pytest.raises(SpecError) as caught:
        tensorrt_plan_values(bad.spec)
    assert "gpu_targets[1]: 'ampere' is not a GPU target" in str(caught.value)
    with pytest.raises(SpecError) as caught:
        tensorrt_plan_values(fp8.spec)
    assert "gpu_targets[0]: fp8 needs compute capability 8.9 or newer; sm86 is 8.6" in str(
        caught.value
    )
    assert "gpu_targets[1]" not in str(caught.value)
