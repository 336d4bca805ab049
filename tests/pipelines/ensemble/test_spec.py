"""The ensemble kind's spec part on engine signatures alone (no ONNX, no YAML): the served
signature (the tensors no step makes are the inputs, with the intersected profile of what
they feed; every made tensor is an output; the smallest batch), and the wiring rules
(tests/fixtures/specs/pipeline_errors checks the located messages through load_spec)."""

from __future__ import annotations

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.pipelines.ensemble.spec import EnsembleKind, EnsembleSettings, StepSpec


def engine(name: str, batch: int, inputs: list[TensorInfo], outputs: list[TensorInfo]):
    return ModelInfo(name, "1", "onnxruntime", "fp32", batch, tuple(inputs), tuple(outputs))


IMAGE = TensorInfo("x", "FP32", (-1, 3, -1, -1), (1, 3, 32, 32), (1, 3, 64, 64), (4, 3, 128, 128))
ENGINES = {
    "det": engine("det", 4, [IMAGE], [TensorInfo("maps", "FP32", (-1, 1, -1, -1))]),
    "cls": engine(
        "cls", 2,
        [TensorInfo("crops", "FP32", (-1, 3, -1, -1), (1, 3, 48, 48), (2, 3, 64, 64),
                    (2, 3, 256, 256)),
         TensorInfo("maps", "FP32", (-1, 1, -1, -1), (1, 1, 8, 8), (1, 1, 8, 8), (2, 1, 64, 64))],
        [TensorInfo("label", "INT64", (-1,))],
    ),
}  # fmt: skip


def settings(*steps: tuple[str, dict[str, str], dict[str, str]]) -> EnsembleSettings:
    return EnsembleSettings(steps=[StepSpec(engine=e, inputs=i, outputs=o) for e, i, o in steps])


def test_the_signature_comes_from_the_steps() -> None:
    wired = settings(
        ("det", {"x": "image"}, {"maps": "text_map"}),
        ("cls", {"crops": "image", "maps": "text_map"}, {"label": "direction"}),
    )
    assert EnsembleKind().check(wired, ENGINES, {}) == []
    signature = EnsembleKind().signature(wired, ENGINES)
    (image,) = signature.inputs  # fed to det.x and cls.crops: their profiles intersect
    assert (image.name, image.shape) == ("image", (-1, 3, -1, -1))
    assert (image.min, image.opt, image.max) == ((1, 3, 48, 48), (1, 3, 64, 64), (2, 3, 128, 128))
    assert [(t.name, t.datatype) for t in signature.outputs] == [
        ("text_map", "FP32"), ("direction", "INT64")]  # fmt: skip
    assert signature.max_batch_size == 2


def test_wiring_mistakes_are_each_reported_under_their_step() -> None:
    wired = settings(("det", {"x": "image"}, {"maps": "text_map"}),
                     ("cls", {"crops": "image"}, {"label": "text_map"}))  # fmt: skip
    assert EnsembleKind().check(wired, ENGINES, {}) == [
        (("steps", 1, "inputs"),
         "engine 'cls' input 'maps' is not mapped; map each to a tensor"),
        (("steps", 1, "outputs", "label"),
         "tensor 'text_map' is already made by step 0; give it another name"),
    ]  # fmt: skip


def test_a_tensor_of_another_datatype_or_disjoint_profiles_is_refused() -> None:
    wired = settings(("det", {"x": "image"}, {"maps": "text_map"}),
                     ("cls", {"crops": "image", "maps": "image"}, {"label": "direction"}),
                     ("det", {"x": "direction"}, {"maps": "again"}))  # fmt: skip
    assert EnsembleKind().check(wired, ENGINES, {}) == [
        (("steps", 1, "inputs", "maps"),
         "tensor 'image' feeds inputs whose optimization profiles do not overlap; use two "
         "pipeline inputs"),
        (("steps", 2, "inputs", "x"),
         "tensor 'direction' is INT64 [-1], but engine input 'x' takes FP32 [-1, 3, -1, -1]"),
    ]  # fmt: skip
