"""gRPC messages <-> the protocol layer's types (:mod:`mmaas.server.grpc.converters`),
checked against tritonclient's own encoder and decoder so that the wire format is the
client's: raw entries paired with inputs, typed contents per datatype (BF16 in
fp32_contents, FP16 refused), shared memory inputs, and responses tritonclient reads."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2
from tritonclient.utils import deserialize_bf16_tensor

from mmaas.core.datatypes import BFLOAT16
from mmaas.server.grpc.converters import CONTENTS_FIELD, from_response, to_request
from mmaas.server.protocol.codec import from_values
from mmaas.server.protocol.shm import TensorRef
from mmaas.server.protocol.types import InferResponse, OutputTensor, RawBytes, Values
from mmaas.server.status import InvalidArgument

BF16_VALUES = np.array([[1.5, -2.0, 3.140625], [0.0, 65280.0, -0.0078125]], np.float32)


def client_request(**arrays: tuple[np.ndarray, str]) -> object:
    """A ModelInferRequest exactly as tritonclient builds it (raw contents)."""
    request = service_pb2.ModelInferRequest(model_name="m", id="7")
    for name, (array, datatype) in arrays.items():
        infer_input = triton.InferInput(name, list(array.shape), datatype)
        infer_input.set_data_from_numpy(array)
        request.inputs.append(infer_input._get_tensor())
        request.raw_input_contents.append(infer_input._get_content())
    return request


def refused(message: object) -> str:
    with pytest.raises(InvalidArgument) as info:
        to_request(message, 0)
    return info.value.message


def test_raw_entries_pair_with_the_inputs_in_order() -> None:
    a, b = np.ones((2, 2), np.float32), np.array([b"x", b""], object)
    request = to_request(client_request(a=(a, "FP32"), b=(b, "BYTES")), 123)
    assert (request.id, request.size) == ("7", 123)
    assert request.headers == [("a", "FP32", (2, 2)), ("b", "BYTES", (2,))]
    assert isinstance(request.inputs[0].data, RawBytes)
    assert bytes(request.inputs[0].data.data) == a.tobytes()


@pytest.mark.parametrize("datatype", [d for d, field in CONTENTS_FIELD.items() if field])
def test_typed_contents_come_from_the_datatype_field(datatype: str) -> None:
    values = [b"a", b""] if datatype == "BYTES" else [1, 0]
    message = service_pb2.ModelInferRequest()
    tensor = message.inputs.add(name="x", datatype=datatype, shape=[2])
    getattr(tensor.contents, CONTENTS_FIELD[datatype]).extend(values)
    request = to_request(message, 0)
    assert isinstance(request.inputs[0].data, Values)
    decoded = from_values(request.inputs[0], request.inputs[0].data.values)
    assert decoded.tolist() == ([b"a", b""] if datatype == "BYTES" else values)


def test_bf16_travels_in_fp32_contents() -> None:
    message = service_pb2.ModelInferRequest()
    tensor = message.inputs.add(name="x", datatype="BF16", shape=[2, 3])
    tensor.contents.fp32_contents.extend(BF16_VALUES.reshape(-1).tolist())
    (decoded,) = [from_values(t, t.data.values) for t in to_request(message, 0).inputs]
    assert decoded.dtype == BFLOAT16
    np.testing.assert_array_equal(decoded.astype(np.float32), BF16_VALUES)


def test_wire_rules_only_grpc_has() -> None:
    message = client_request(a=(np.ones(2, np.float32), "FP32"))
    message.inputs.add(name="b", datatype="FP32", shape=[2]).contents.fp32_contents.extend([1, 2])
    assert "raw_input_contents has 1 entries for 2 inputs" in refused(message)
    message = service_pb2.ModelInferRequest()
    message.inputs.add(name="a", datatype="FP16", shape=[1]).contents.fp32_contents.append(1)
    assert "input 'a': FP16 has no typed contents field in KServe v2" in refused(message)
    message = service_pb2.ModelInferRequest()
    message.inputs.add(name="a", datatype="FP32", shape=[1]).contents.int_contents.append(1)
    assert "FP32 data goes in contents.fp32_contents, got contents.int_contents" in refused(message)


def test_an_input_with_no_source_or_two_and_an_unknown_datatype() -> None:
    message = client_request(a=(np.ones(2, np.float32), "FP32"))
    message.inputs[0].contents.fp32_contents.extend([1, 2])
    assert "input 'a' needs exactly one data source" in refused(message)
    assert refused(message).endswith("it sends values and raw bytes")
    message = service_pb2.ModelInferRequest()
    message.inputs.add(name="a", datatype="FP32", shape=[1])
    assert refused(message).endswith("it sends none")
    message.inputs[0].datatype = "FLOAT"
    assert "input 'a': datatype 'FLOAT' is not a KServe v2 datatype" in refused(message)


def test_shared_memory_inputs_pair_no_raw_entry_and_outputs_keep_their_place() -> None:
    message = client_request(b=(np.ones(2, np.float32), "FP32"))
    shared = message.inputs.add(name="a", datatype="FP32", shape=[2])
    shared.parameters["shared_memory_region"].string_param = "r"
    shared.parameters["shared_memory_byte_size"].int64_param = 8
    output = message.outputs.add(name="y")
    output.parameters["shared_memory_region"].string_param = "o"
    output.parameters["shared_memory_byte_size"].int64_param = 16
    request = to_request(message, 0)
    assert request.inputs[1].data == TensorRef("r", 0, 8)
    assert request.outputs[0].ref == TensorRef("o", 0, 16)


def test_responses_read_back_with_tritonclient() -> None:
    boxes = np.random.default_rng(1).random((1, 4)).astype(np.float16)
    response = InferResponse(
        "m",
        "1",
        "7",
        [
            OutputTensor("boxes", "FP16", (1, 4), boxes),
            OutputTensor("labels", "BYTES", (2,), np.array([b"cat", b""], object)),
            OutputTensor("y", "BF16", (2, 3), BF16_VALUES.astype(BFLOAT16)),
            OutputTensor("placed", "FP32", (2,), None),
        ],
    )
    message = from_response(response)
    result = triton.InferResult(message)
    assert (message.model_name, message.model_version, message.id) == ("m", "1", "7")
    np.testing.assert_array_equal(result.as_numpy("boxes"), boxes)
    assert result.as_numpy("labels").tolist() == [b"cat", b""]
    words = deserialize_bf16_tensor(message.raw_output_contents[2])
    np.testing.assert_array_equal(words.reshape(2, 3), BF16_VALUES)
    assert message.raw_output_contents[3] == b""  # one entry per output, as Triton sends
