"""Contract tests: the exact trtexec argv for real models, awkward names and refusals.

TensorRT cannot run here, so these vectors are the contract a GPU host executes; each
flag's spelling per release is from mmaas.backends.tensorrt.runtime.releases (checked against
sampleOptions.cpp).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx
import pytest

from mmaas.backends.tensorrt.builder.settings import TensorRTSettings
from mmaas.backends.tensorrt.builder.trtexec.argv import trtexec_argv
from mmaas.core.errors import SpecError
from mmaas.core.manifest import ModelInfo, TensorInfo
from onnx_builder import TRT_SETTINGS

SETTINGS = TRT_SETTINGS  # model.yaml's defaults
PROFILES = {  # full shapes incl. batch, as model.yaml gives them
    "ppocr-det": ((1, 3, 32, 32), (1, 3, 640, 640), (4, 3, 1280, 1280)),
    "ppocr-rec": ((1, 3, 48, 32), (4, 3, 48, 320), (8, 3, 48, 2000)),
    "ppocr-cls": ((1, 3, 48, 192), (8, 3, 48, 192), (32, 3, 48, 192)),
}
TAIL = [
    "--builderOptimizationLevel=3",
    "--hardwareCompatibilityLevel=none",
    "--timingCacheFile=/cache/t.cache",
    "--profilingVerbosity=detailed",
    "--exportLayerInfo=/out/exports/layers.json",
    "--exportTimes=/out/exports/times.json",
    "--exportProfile=/out/exports/profile.json",
]


def real_model(path: Path, name: str, precision: str = "fp16") -> ModelInfo:
    """ModelInfo of a real ONNX file: dims without a positive value are dynamic (-1)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    low, mid, high = PROFILES[name]

    def dims(value_info: onnx.ValueInfoProto) -> tuple[int, ...]:
        return tuple(
            d.dim_value if d.dim_value > 0 else -1 for d in value_info.type.tensor_type.shape.dim
        )

    inputs = tuple(TensorInfo(i.name, "FP32", dims(i), low, mid, high) for i in graph.input)
    outputs = tuple(TensorInfo(o.name, "FP32", dims(o)) for o in graph.output)
    return ModelInfo(name, "1.0.0", "tensorrt", precision, high[0], inputs, outputs)


def argv(
    model: ModelInfo,
    version: str = "10.13",
    settings: TensorRTSettings | None = None,
    **kwargs: object,
) -> list[str]:
    return trtexec_argv(
        model,
        settings or SETTINGS,
        version,
        "/build/m.onnx",
        "/out/model.plan",
        "/cache/t.cache",
        exports_dir="/out/exports",
        **kwargs,
    )


def tensor(name: str, shape: tuple[int, ...], low=None, mid=None, high=None) -> TensorInfo:
    return TensorInfo(name, "FP32", shape, low, mid, high)


def model_of(*inputs: TensorInfo, precision: str = "fp32") -> ModelInfo:
    return ModelInfo("m", "1", "tensorrt", precision, 0, inputs, (tensor("y", (-1,)),))


def test_contract_trtexec_argv_ppocr_det_fp16_on_10_13(ppocr_models: dict[str, Path]) -> None:
    model = real_model(ppocr_models["ppocr-det"], "ppocr-det")
    assert argv(model) == [
        "trtexec",
        "--onnx=/build/m.onnx",
        "--saveEngine=/out/model.plan",
        "--minShapes=x:1x3x32x32",
        "--optShapes=x:1x3x640x640",
        "--maxShapes=x:4x3x1280x1280",
        "--memPoolSize=workspace:2048",
        "--fp16",
        *TAIL,
    ]


def test_contract_trtexec_argv_ppocr_rec_covers_the_declared_question_mark_dim(
    ppocr_models: dict[str, Path],
) -> None:
    model = real_model(ppocr_models["ppocr-rec"], "ppocr-rec")
    assert model.inputs[0].shape == (-1, 3, -1, -1)
    assert argv(model, "10.14.1") == [
        "trtexec",
        "--onnx=/build/m.onnx",
        "--saveEngine=/out/model.plan",
        "--minShapes=x:1x3x48x32",
        "--optShapes=x:4x3x48x320",
        "--maxShapes=x:8x3x48x2000",
        "--memPoolSize=workspace:2048M",
        "--fp16",
        *TAIL,
    ]


def test_contract_trtexec_argv_ppocr_cls_fp32_on_8_6(ppocr_models: dict[str, Path]) -> None:
    model = real_model(ppocr_models["ppocr-cls"], "ppocr-cls", precision="fp32")
    assert argv(model, "8.6") == [
        "trtexec",
        "--onnx=/build/m.onnx",
        "--saveEngine=/out/model.plan",
        "--minShapes=x:1x3x48x192",
        "--optShapes=x:8x3x48x192",
        "--maxShapes=x:32x3x48x192",
        "--memPoolSize=workspace:2048",
        "--noTF32",
        *TAIL,
    ]


def test_contract_trtexec_argv_colon_names_quoted_in_one_element() -> None:
    """C1: names with ':' are single-quoted; all inputs share one argv element."""
    model = model_of(
        tensor(
            "onnx::Conv_1", (-1, 3, 224, 224), (1, 3, 224, 224), (1, 3, 224, 224), (1, 3, 224, 224)
        ),
        tensor("input:0", (-1, 10), (1, 10), (1, 10), (1, 10)),
    )
    assert "--minShapes='onnx::Conv_1':1x3x224x224,'input:0':1x10" in argv(model)


def test_contract_trtexec_argv_several_inputs_and_scalar() -> None:
    """C2: mixed inputs in one flag; a rank-0 input is name:scalar on 10.x, left out on 8.x
    (trtexec 8.x parses only AxB dims; a static input needs no profile entry)."""
    model = model_of(
        tensor("audio", (1, 80, -1), (1, 80, 1), (1, 80, 1000), (1, 80, 10000)),
        tensor("length", (1,), (1,), (1,), (1,)),
        tensor("temperature", (), (), (), ()),
    )
    assert argv(model)[3:6] == [
        "--minShapes=audio:1x80x1,length:1,temperature:scalar",
        "--optShapes=audio:1x80x1000,length:1,temperature:scalar",
        "--maxShapes=audio:1x80x10000,length:1,temperature:scalar",
    ]
    assert argv(model, "8.6")[3] == "--minShapes=audio:1x80x1,length:1"


def test_contract_trtexec_argv_static_model_gets_no_shape_flags() -> None:
    model = model_of(tensor("x", (1, 3, 8, 8), (1, 3, 8, 8), (1, 3, 8, 8), (1, 3, 8, 8)))
    assert not [a for a in argv(model) if "Shapes" in a]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "8.2",
            [
                "--workspace=2048",
                "--noTF32",
                "--timingCacheFile=/cache/t.cache",
                "--exportTimes=/out/exports/times.json",
                "--exportProfile=/out/exports/profile.json",
            ],
        ),
        ("11.0", ["--memPoolSize=workspace:2048M", "--noTF32", *TAIL]),
    ],
)
def test_contract_trtexec_argv_per_release(version: str, expected: list[str]) -> None:
    model = model_of(tensor("x", (-1, 4), (1, 4), (2, 4), (3, 4)))
    assert argv(model, version)[6:] == expected


def test_contract_trtexec_argv_build_only_and_portability_flags() -> None:
    settings = replace(
        SETTINGS,
        workspace_mib=512,
        builder_optimization_level=5,
        hardware_compatibility_level="same_compute_capability",
        version_compatible=True,
        timing_run=False,
    )
    model = model_of(tensor("x", (-1, 4), (1, 4), (2, 4), (3, 4)), precision="bf16")
    assert argv(model, "10.14", settings, verify_cache=True)[6:] == [
        "--memPoolSize=workspace:512M",
        "--bf16",
        "--builderOptimizationLevel=5",
        "--hardwareCompatibilityLevel=sameComputeCapability",
        "--versionCompatible",
        "--timingCacheFile=/cache/t.cache",
        "--errorOnTimingCacheMiss",
        "--skipInference",
        "--profilingVerbosity=detailed",
        "--exportLayerInfo=/out/exports/layers.json",
    ]


def test_contract_trtexec_argv_int8_calibration_and_typed_graphs() -> None:
    model = model_of(tensor("x", (-1, 4), (1, 4), (2, 4), (3, 4)), precision="int8")
    assert argv(model, calibration_cache="/build/calib.cache")[7:9] == [
        "--int8",
        "--calib=/build/calib.cache",
    ]
    assert argv(model, typed_graph=True)[7] == "--stronglyTyped"
    assert argv(model, "11.0", typed_graph=True)[7] == "--builderOptimizationLevel=3"


def refused(
    model: ModelInfo,
    version: str = "10.13",
    settings: TensorRTSettings | None = None,
    **kwargs: object,
) -> str:
    with pytest.raises(SpecError) as caught:
        argv(model, version, settings, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize(
    ("precision", "version", "kwargs", "says"),
    [
        ("fp16", "11.0", {}, "target_precision: TensorRT 11.0+ has no precision flags"),
        ("int8", "10.13", {}, "int8 needs a calibration cache"),
        ("fp8", "10.13", {"typed_graph": True, "compute_capability": "8.6"}, "8.9 or newer"),
        ("fp8", "10.13", {}, "fp8 needs an ONNX graph with Q/DQ nodes"),
        ("bf16", "8.6", {}, "bf16 builds need TensorRT 10"),
        ("fp16", "7.2", {}, "build.tensorrt.version: TensorRT 7.2 is not supported"),
    ],
)
def test_contract_trtexec_argv_refuses_precision(
    precision: str, version: str, kwargs: dict, says: str
) -> None:
    model = model_of(tensor("x", (-1, 4), (1, 4), (2, 4), (3, 4)), precision=precision)
    assert says in refused(model, version, **kwargs)


def test_contract_trtexec_argv_refuses_flags_the_release_lacks() -> None:
    settings = replace(
        SETTINGS,
        workspace_mib=64,
        builder_optimization_level=5,
        hardware_compatibility_level="same_compute_capability",
        version_compatible=True,
    )
    text = refused(
        model_of(tensor("x", (-1, 4), (1, 4), (2, 4), (3, 4))), "8.5", settings, verify_cache=True
    )
    for key in (
        "builder_optimization_level",
        "hardware_compatibility_level",
        "version_compatible",
        "timing_cache_verify",
    ):
        assert f"build.tensorrt.{key}:" in text
    assert "4 problems" in text


def test_contract_trtexec_argv_refuses_bad_profiles_naming_input_and_axis() -> None:
    text = refused(
        model_of(
            tensor("a,b", (-1,), (1,), (1,), (1,)),
            tensor("dyn", (-1, 3)),
            tensor("c", (-1, 3), (1, 3), (4, 3), (2, 3)),
            tensor("d", (-1, 3), (1, 3), (1, 4), (1, 3)),
            tensor("e", (-1, 3), (1,), (1, 3), (1, 3)),
        )
    )
    assert "inputs[0].name: 'a,b' holds a quote or comma" in text
    assert "inputs[1]: input 'dyn' has dynamic dims but no min/opt/max" in text
    assert "inputs[2].opt[0]: axis 0 of 'c': need min <= opt <= max, got 1, 4, 2" in text
    assert "inputs[3].min[1]: axis 1 of 'd' is static (3)" in text
    assert "inputs[4].min: rank 1 but input 'e' has rank 2" in text
