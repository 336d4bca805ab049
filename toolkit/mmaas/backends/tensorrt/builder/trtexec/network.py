"""The input dims trtexec's ONNX parser gives the network, read from the ONNX file itself.

trtexec decides which inputs need an optimization profile from the *network* it parsed
(``setupNetworkAndConfig`` in ``samples/common/sampleEngines.cpp``: an input is dynamic
when a dim is -1), not from model.yaml: a ``shape:`` that pins an axis the ONNX file
leaves dynamic does not make the network static. So the shape flags follow these dims
(:func:`mmaas.backends.tensorrt.builder.trtexec.shapes.profile_args`). The ONNX parser maps a dim
without a positive ``dim_value`` (a ``dim_param``, 0, -1 or nothing) to -1, as
:mod:`mmaas.spec.onnx_graph` does on the host. Only the graph is read
(``load_external_data=False``); initializers listed as graph inputs are left out (they are
weights, not network inputs).
"""

from __future__ import annotations

from pathlib import Path

NetworkInputs = dict[str, tuple[int, ...]]


def network_inputs(onnx_file: Path) -> NetworkInputs:
    """``{input name: dims}`` of the ONNX graph at ``onnx_file``, -1 for a dynamic dim and
    ``()`` for a scalar; an input without any shape is left out.

    Raises:
        OSError: the file cannot be read. google.protobuf.message.DecodeError: not ONNX.
    """
    import onnx

    graph = onnx.load(str(onnx_file), load_external_data=False).graph
    weights = {initializer.name for initializer in graph.initializer}
    found: NetworkInputs = {}
    for tensor in graph.input:
        kind = tensor.type.tensor_type
        if tensor.name in weights or not kind.HasField("shape"):
            continue
        found[tensor.name] = tuple(d.dim_value if d.dim_value > 0 else -1 for d in kind.shape.dim)
    return found
