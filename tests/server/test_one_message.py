"""One mistake, one message, over either protocol: the same malformed requests sent to one
real server (subprocess) over gRPC (KServe v2 ``ModelInfer`` through the raw stub, and
tritonclient.grpc) and over HTTP (``/infer`` with JSON tensors and Triton's binary tensor
data through http.client, and tritonclient.http) get the same text, with the status each
protocol maps it to (INVALID_ARGUMENT = 400, NOT_FOUND = 404). The model takes an FP32, a
UINT8 and a BYTES input (``graphs.mistakes_model``)."""

from __future__ import annotations

import http.client
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from .conftest import RunningServer

HTTP_STATUS = {"INVALID_ARGUMENT": 400, "NOT_FOUND": 404}
FIELDS = {"FP32": "fp32_contents", "UINT8": "uint_contents", "BYTES": "bytes_contents"}


@dataclass(frozen=True)
class Tensor:
    """One input as sent: raw bytes (``raw``), typed values (``values``), both, neither,
    or a shared memory ``region``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    raw: bytes | None = None
    values: list | None = None
    region: str | None = None


def length_prefixed(*elements: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(element)) + element for element in elements)


GOOD = {
    "x": Tensor("x", "FP32", (2, 2), np.arange(4, dtype=np.float32).tobytes(), [0.0, 1, 2, 3]),
    "n": Tensor("n", "UINT8", (2, 2), bytes([1, 2, 3, 4]), [1, 2, 3, 4]),
    "t": Tensor("t", "BYTES", (2, 1), length_prefixed(b"a", b"b"), ["a", "b"]),
}


def inputs(mode: str, *extra: Tensor, **changes: Tensor | None) -> list[Tensor]:
    """The three good inputs as raw bytes or typed values (``mode``), with ``changes`` (a
    name to None drops that input) and ``extra`` inputs after them."""
    chosen = []
    for name, tensor in GOOD.items():
        tensor = changes.get(name, tensor)  # type: ignore[assignment]
        if tensor is not None:
            chosen.append(tensor if name in changes else _only(tensor, mode))
    return [*chosen, *extra]


def _only(tensor: Tensor, mode: str) -> Tensor:
    return replace(tensor, values=None) if mode == "raw" else replace(tensor, raw=None)


@dataclass(frozen=True)
class Case:
    tensors: list[Tensor]
    model: str = "mistakes"
    version: str = ""
    outputs: tuple[str, ...] = ()


X = GOOD["x"]
CASES = {
    "12 bytes for FP32 [2, 2]": Case(inputs("raw", x=replace(X, raw=b"\0" * 12, values=None))),
    "3 values for FP32 [2, 2]": Case(inputs("values", x=replace(X, raw=None, values=[0.0] * 3))),
    "300 as UINT8": Case(inputs("values", n=Tensor("n", "UINT8", (2, 2), values=[1, 2, 3, 300]))),
    "a BYTES length past the data": Case(
        inputs("raw", t=Tensor("t", "BYTES", (2, 1), length_prefixed(b"a") + b"\x32\0\0\0ab"))
    ),
    "another datatype": Case(inputs("raw", x=Tensor("x", "INT32", (2, 2), b"\0" * 16))),
    "no datatype at all": Case(inputs("raw", x=Tensor("x", "FP99", (2, 2), b"\0" * 16))),
    "a shape outside the profile": Case(inputs("raw", x=Tensor("x", "FP32", (5, 2), b"\0" * 40))),
    "an unknown input": Case(inputs("raw", Tensor("y", "FP32", (2, 2), b"\0" * 16))),
    "a missing input": Case(inputs("raw", n=None)),
    "an input twice": Case(inputs("raw", _only(X, "raw"))),
    "values and raw bytes": Case(inputs("raw", x=X)),
    "no data": Case(inputs("values", x=Tensor("x", "FP32", (2, 2)))),
    "an unknown region": Case(inputs("raw", x=Tensor("x", "FP32", (2, 2), region="nope"))),
    "an unknown output": Case(inputs("raw"), outputs=("x_out", "zzz")),
    "an unknown model": Case(inputs("raw"), model="nope"),
    "an unknown version": Case(inputs("raw"), version="9"),
}


def over_grpc(server: RunningServer, case: Case) -> tuple[str, str]:
    """(status, message) of ``case`` sent as a ModelInferRequest."""
    message = service_pb2.ModelInferRequest(
        model_name=case.model, model_version=case.version, id="same"
    )
    for sent in case.tensors:
        tensor = message.inputs.add(name=sent.name, datatype=sent.datatype, shape=sent.shape)
        if sent.region is not None:
            tensor.parameters["shared_memory_region"].string_param = sent.region
            tensor.parameters["shared_memory_byte_size"].int64_param = 16
        if sent.raw is not None:
            message.raw_input_contents.append(sent.raw)
        if sent.values is not None:
            values = [v.encode() if isinstance(v, str) else v for v in sent.values]
            getattr(tensor.contents, FIELDS[sent.datatype]).extend(values)
    for name in case.outputs:
        message.outputs.add(name=name)
    with grpc.insecure_channel(server.url) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(message, timeout=30)
    return info.value.code().name, info.value.details()


def over_http(server: RunningServer, case: Case) -> tuple[int, str]:
    """(HTTP status, message) of ``case`` sent to ``/infer`` (binary data for raw bytes)."""
    items, blobs = [], []
    for sent in case.tensors:
        item: dict = {"name": sent.name, "datatype": sent.datatype, "shape": list(sent.shape)}
        parameters: dict = {}
        if sent.region is not None:
            parameters |= {"shared_memory_region": sent.region, "shared_memory_byte_size": 16}
        if sent.raw is not None:
            parameters["binary_data_size"] = len(sent.raw)
            blobs.append(sent.raw)
        if sent.values is not None:
            item["data"] = sent.values
        items.append(item | ({"parameters": parameters} if parameters else {}))
    header = {"id": "same", "inputs": items, "outputs": [{"name": n} for n in case.outputs]}
    head = json.dumps(header).encode()
    path = f"/v2/models/{case.model}" + (f"/versions/{case.version}" if case.version else "")
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        connection.request(
            "POST",
            path + "/infer",
            body=head + b"".join(blobs),
            headers={"Inference-Header-Content-Length": str(len(head))},
        )
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())["error"]
    finally:
        connection.close()


@pytest.fixture(scope="module")
def server(module_server: Callable[..., RunningServer], mistakes_dir: Path) -> RunningServer:
    return module_server(mistakes_dir)


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_mistake_gets_the_same_message_over_grpc_and_http(
    server: RunningServer, case: str
) -> None:
    status, over_grpc_message = over_grpc(server, CASES[case])
    http_status, over_http_message = over_http(server, CASES[case])
    assert over_grpc_message == over_http_message
    assert HTTP_STATUS[status] == http_status, (status, http_status, over_http_message)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "12 bytes for FP32 [2, 2]",
            "input 'x': the data holds 12 bytes, but shape [2, 2] of FP32 (4 bytes each) needs 16",
        ),
        (
            "3 values for FP32 [2, 2]",
            "input 'x': the data holds 3 values, but shape [2, 2] needs 4",
        ),
        (
            "300 as UINT8",
            "input 'n': value 300 at index [1, 1] does not fit UINT8 (0..255); refusing to "
            "narrow it",
        ),
        ("an unknown region", "input 'x': Unable to find shared memory region: 'nope'"),
        ("values and raw bytes", "input 'x' needs exactly one data source"),
    ],
)
def test_the_messages_say_what_was_sent_and_what_was_needed(
    server: RunningServer, case: str, message: str
) -> None:
    assert over_http(server, CASES[case])[1].startswith(message)


def test_the_official_clients_read_the_same_message(server: RunningServer) -> None:
    """tritonclient.grpc and tritonclient.http, each sending INT32 data where the model
    takes FP32, and a model this server does not serve."""
    data = {"x": np.zeros((2, 2), np.int32), "n": np.ones((2, 2), np.uint8)}
    data["t"] = np.array([[b"a"], [b"b"]], dtype=object)
    datatypes = {"x": "INT32", "n": "UINT8", "t": "BYTES"}
    messages = []
    for module, client in (
        (triton_grpc, triton_grpc.InferenceServerClient(server.url)),
        (triton_http, triton_http.InferenceServerClient(server.http_url)),
    ):
        tensors = []
        for name, array in data.items():
            tensor = module.InferInput(name, list(array.shape), datatypes[name])
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        for model in ("mistakes", "nope"):
            with pytest.raises(InferenceServerException) as info:
                client.infer(model, tensors)
            messages.append(info.value.message())
    assert messages[:2] == messages[2:], messages
    assert messages[0] == ("input 'x': datatype INT32, expected FP32 (the engine's I/O datatype)")
    assert messages[1].startswith("unknown model 'nope' in model_name")


def test_a_good_request_is_answered_alike(server: RunningServer) -> None:
    """The sanity check of the cases above: the good inputs, raw over gRPC and as values
    over HTTP, give the same outputs."""
    tensors = inputs("raw")
    message = service_pb2.ModelInferRequest(model_name="mistakes")
    for sent in tensors:
        message.inputs.add(name=sent.name, datatype=sent.datatype, shape=sent.shape)
        message.raw_input_contents.append(sent.raw)
    with grpc.insecure_channel(server.url) as channel:
        reply = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(message, timeout=30)
    result = triton_grpc.InferResult(reply)
    body = {
        "inputs": [
            {"name": t.name, "datatype": t.datatype, "shape": list(t.shape), "data": t.values}
            for t in inputs("values")
        ]
    }
    connection = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    connection.request("POST", "/v2/models/mistakes/infer", body=json.dumps(body))
    outputs = {o["name"]: o["data"] for o in json.loads(connection.getresponse().read())["outputs"]}
    connection.close()
    assert result.as_numpy("x_out").reshape(-1).tolist() == outputs["x_out"] == [0, 1, 2, 3]
    assert result.as_numpy("n_out").reshape(-1).tolist() == outputs["n_out"] == [1, 2, 3, 4]
    assert [v.decode() for v in result.as_numpy("t_out").reshape(-1)] == outputs["t_out"]
