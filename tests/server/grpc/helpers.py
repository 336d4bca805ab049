"""Helpers of the gRPC front end's tests: a tritonclient input from an array, the reference
answer of in-process ONNX Runtime, hand-made ``ModelInferRequest`` messages sent with the
generated stub, and the check of an error a call must end in (status and message)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer


def infer_input(name: str, array: np.ndarray, datatype: str) -> triton.InferInput:
    """A tritonclient.grpc input named ``name`` holding ``array`` as ``datatype``."""
    tensor = triton.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def reference(source: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """In-process ONNX Runtime on the original ONNX file (the floor and the truth)."""
    return ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, inputs)


def rpc(server: RunningServer, request: object) -> object:
    """``request`` (a ``ModelInferRequest``) sent to ``server`` with the generated stub."""
    with grpc.insecure_channel(server.url) as channel:
        return service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)


def rpc_error(server: RunningServer, request: object) -> grpc.RpcError:
    """The ``grpc.RpcError`` that ``request`` must end in."""
    with pytest.raises(grpc.RpcError) as info:
        rpc(server, request)
    return info.value


def raw_request(model: str, tensors: dict[str, tuple[str, list[int], bytes]]) -> object:
    """A ``ModelInferRequest`` of ``model`` with each input's bytes in
    ``raw_input_contents``: ``tensors`` maps names to (datatype, shape, bytes)."""
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, (datatype, shape, raw) in tensors.items():
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(raw)
    return request


def expect_error(call: Callable[[], object], status: str, *fragments: str) -> str:
    """Run a tritonclient call that must fail with ``status``; the message must hold
    every fragment (the field's name, what was expected, what was got)."""
    with pytest.raises(InferenceServerException) as info:
        call()
    assert info.value.status() == f"StatusCode.{status}", info.value.message()
    for fragment in fragments:
        assert fragment in info.value.message(), info.value.message()
    return info.value.message()
