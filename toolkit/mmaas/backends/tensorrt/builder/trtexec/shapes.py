"""trtexec shape specs of an optimization profile, and the checks that make them complete.

The syntax is trtexec's parser (``getShapesBuild`` / ``splitNameAndValue`` in
``samples/common/sampleOptions.cpp``): all inputs in one ``--minShapes`` (``--optShapes``,
``--maxShapes``) element, comma separated, ``name:1x3x224x224``; a name holding ``:`` is
wrapped in single quotes (``'onnx::Conv_1':1x3x224x224``, C1); a rank-0 input is
``name:scalar`` where the parser knows that word (10.x and later). A name holding ``'`` or
``,`` cannot be written. trtexec silently sets an uncovered dynamic dim to 1, so every input
with a dynamic dim must carry a full profile; a model without dynamic inputs gets no shape
flags (trtexec refuses explicit shapes for a static model).

"Dynamic" is the *network's* view (:mod:`mmaas.backends.tensorrt.builder.trtexec.network`): an
axis the ONNX file leaves dynamic stays dynamic to trtexec even where model.yaml pins it
with ``shape:`` or min = opt = max, so such an input still gets its three shapes (the
pinned ones); without them trtexec would pin the axis to 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmaas.core.errors import SpecProblem
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.core.profile import POINTS, axis_fault, fixed_mismatch, quotable, wrong_ranks


def shape_spec(inputs: Sequence[TensorInfo], point: str, scalar_word: bool) -> str:
    """One shape-list value: ``name:AxB,'a:b':C`` at ``point`` (``min``/``opt``/``max``);
    rank-0 inputs become ``name:scalar`` when ``scalar_word``, else are left out."""
    parts = []
    for tensor in inputs:
        dims = getattr(tensor, point)
        if not dims and not scalar_word:
            continue
        value = "x".join(str(d) for d in dims) if dims else "scalar"
        name = f"'{tensor.name}'" if ":" in tensor.name else tensor.name
        parts.append(f"{name}:{value}")
    return ",".join(parts)


def network_shape(
    tensor: TensorInfo, network: Mapping[str, Sequence[int]] | None
) -> tuple[int, ...]:
    """The dims trtexec's network gives ``tensor`` (-1 dynamic): ``network``'s entry (the
    ONNX file's own dims), else the served shape."""
    return tuple(network.get(tensor.name, tensor.shape) if network else tensor.shape)


def profile_args(
    model: ModelInfo,
    scalar_word: bool,
    problems: list[SpecProblem],
    spec_file: str,
    network: Mapping[str, Sequence[int]] | None = None,
) -> list[str]:
    """The three shape flags, or none when the network has no dynamic input; appends every
    profile problem (unquotable name, missing profile, rank, static dim, order) to
    ``problems``. ``network``: the ONNX file's input dims (None: the served shapes)."""
    for index, tensor in enumerate(model.inputs):
        declared = TensorInfo(
            tensor.name, tensor.datatype, network_shape(tensor, network), *_profile(tensor)
        )
        problems += _tensor_problems(declared, f"inputs[{index}]", spec_file)
    if not any(-1 in network_shape(tensor, network) for tensor in model.inputs):
        return []
    return [
        f"--{point}Shapes={shape_spec(model.inputs, point, scalar_word)}"
        for point in ("min", "opt", "max")
    ]


def _profile(tensor: TensorInfo) -> tuple[Any, Any, Any]:
    return tensor.min, tensor.opt, tensor.max


def _tensor_problems(tensor: TensorInfo, key: str, spec_file: str) -> list[SpecProblem]:
    if not quotable(tensor.name):
        return [
            SpecProblem(
                spec_file,
                f"{key}.name",
                f"{tensor.name!r} holds a quote or "
                "comma, which trtexec's shape syntax cannot express; rename the "
                "input in the ONNX export",
            )
        ]
    profile: dict[str, Any] = {point: getattr(tensor, point) for point in POINTS}
    if any(dims is None for dims in profile.values()):
        if -1 in tensor.shape:
            return [
                SpecProblem(
                    spec_file,
                    key,
                    f"input {tensor.name!r} has dynamic dims "
                    "but no min/opt/max; trtexec would force them to 1",
                )
            ]
        return []
    return _profile_problems(tensor, profile, key, spec_file)


def _profile_problems(
    tensor: TensorInfo, profile: dict[str, Any], key: str, spec_file: str
) -> list[SpecProblem]:
    problems = []
    for point in wrong_ranks(tensor.shape, list(profile.values())):
        problems.append(
            SpecProblem(
                spec_file,
                f"{key}.{point}",
                f"rank {len(profile[point])} but input {tensor.name!r} has rank "
                f"{len(tensor.shape)}",
            )
        )
    if problems:
        return problems
    for axis, declared in enumerate(tensor.shape):
        low, mid, high = (profile[p][axis] for p in POINTS)
        if fixed_mismatch(declared, (low, mid, high)):
            problems.append(
                SpecProblem(
                    spec_file,
                    f"{key}.min[{axis}]",
                    f"axis {axis} of "
                    f"{tensor.name!r} is static ({declared}) in the ONNX "
                    "graph; min, opt and max must all equal it",
                )
            )
        elif axis_fault(axis, declared, (low, mid, high), 0) == "order":
            problems.append(
                SpecProblem(
                    spec_file,
                    f"{key}.opt[{axis}]",
                    f"axis {axis} of "
                    f"{tensor.name!r}: need min <= opt <= max, got "
                    f"{low}, {mid}, {high}",
                )
            )
    return problems
