"""The protocol layer's :class:`~mmaas.server.protocol.types.InferResponse` -> the body of a
KServe v2 REST ``/infer`` response (``$inference_response``: ``model_name``,
``model_version``, ``id``, ``outputs``), each output as JSON ``data`` (flat) or, with
Triton's binary tensor data extension, as binary data after the JSON header
(``parameters.binary_data_size``); an output written to shared memory is reported by name,
datatype and shape only. The bytes and values are the shared codec's
(:mod:`mmaas.server.protocol.codec`).
"""

from __future__ import annotations

from typing import Any

import orjson

from mmaas.server.http.request import BINARY_OUTPUT
from mmaas.server.protocol.codec import to_raw, to_values
from mmaas.server.protocol.types import InferRequest, InferResponse


def encode_response(request: InferRequest, response: InferResponse) -> tuple[bytes, int | None]:
    """The response body and, when an output is binary, the JSON header's length (the
    response's ``Inference-Header-Content-Length``). An output is binary when the
    request's ``outputs`` asks so, or, for one it does not list, when the request set
    ``parameters.binary_data_output``; floats print with full precision, NaN and
    infinities as ``null`` (JSON has neither).

    Raises:
        InvalidArgument: a BYTES output asked as JSON holds bytes that are not UTF-8.
    """
    wishes = {output.name: output.binary for output in request.outputs}
    default = request.parameters.get(BINARY_OUTPUT) is True
    documents, blobs = [], []
    for output in response.outputs:
        document: dict[str, Any] = {"name": output.name, "datatype": output.datatype}
        document["shape"] = list(output.shape)
        if output.data is None:
            pass  # written to its shared memory region: name, datatype and shape only
        elif wishes.get(output.name, default):
            blob = to_raw(output.data)
            document["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            document["data"] = to_values(output.name, output.data)
        documents.append(document)
    head: dict[str, Any] = {
        "model_name": response.model_name,
        "model_version": response.model_version,
    }
    if response.id:
        head["id"] = response.id
    header = orjson.dumps({**head, "outputs": documents}, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return header, None
    return b"".join([header, *blobs]), len(header)
