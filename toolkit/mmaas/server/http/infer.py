"""``POST /v2/models/{m}[/versions/{v}]/infer``: KServe v2 REST inference with JSON
tensors and Triton's binary tensor data extension, over the one request path
(:class:`~mmaas.server.inference.InferencePath`: the same lookup, signature checks,
limits, scheduler, batching and statistics as gRPC's ModelInfer).

Order: read the body (limit, timeout, encoding), parse the JSON header, check the
request's model, size, inputs' names, datatypes and shapes, decode the data, run, encode.
A response with a binary output is ``application/octet-stream`` with
``Inference-Header-Content-Length``; else ``application/json``.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.http.body import read_body
from mmaas.server.http.errors import JSON, failure_response
from mmaas.server.http.request import (
    HEADER,
    InferBody,
    OutputTensor,
    header_length,
    parse_body,
    raw_body,
)
from mmaas.server.http.tensors import (
    decode_inputs,
    encode_response,
    output_datatype,
    raw_bytes,
)
from mmaas.server.inference import InferencePath, Outcome, failure_of
from mmaas.server.repository import ServedModel
from mmaas.server.shm import SystemSharedMemory
from mmaas.server.status import InvalidArgument, RequestError

UNSUPPORTED_OUTPUT_PARAMETERS = {
    "classification": "the classification extension is not supported; request the tensor",
}


class InferEndpoint:
    """The infer endpoint over one request path; ``shm`` is the server's system shared
    memory registry; ``read_timeout_s`` bounds the body."""

    def __init__(self, path: InferencePath, shm: SystemSharedMemory, read_timeout_s: float):
        self.path = path
        self.shm = shm
        self.read_timeout_s = read_timeout_s

    async def handle(self, request: Request) -> Response:
        """Answer one ``/infer`` request (errors as KServe ``{"error"}`` bodies)."""
        params = request.path_params
        try:
            model = self.path.lookup(params["model"], params.get("version", ""))
        except RequestError as exc:  # an unknown model has no statistics to count it in
            return failure_response(failure_of(exc), exc)
        async with self.path.accounted(model, "") as outcome:
            try:
                return await self._infer(request, model, outcome)
            except Exception as exc:
                return failure_response(outcome.failed(exc), exc)

    async def _infer(self, request: Request, model: ServedModel, outcome: Outcome) -> Response:
        data = await read_body(request, model, self.read_timeout_s)
        json_length = header_length(request.headers.get(HEADER), len(data))
        info = model.info
        body = raw_body(info, data) if json_length == 0 else parse_body(data, json_length)
        outcome.request_id = body.id
        requested = [output.name for output in body.outputs]
        names = self.path.admit(model, len(data), body.headers, requested)
        self._check_outputs(body)
        arrays = decode_inputs(body, json_length is not None, self.shm)
        results = await self.path.run(model, arrays, names, None)
        head: dict[str, Any] = {"model_name": model.name, "model_version": model.version}
        if body.id:
            head["id"] = body.id
        declared = {tensor.name: tensor.datatype for tensor in info.outputs}
        chosen = {output.name: output for output in body.outputs}
        outputs = [
            (
                chosen.get(name) or OutputTensor(name, body.binary_output),
                output_datatype(declared.get(name), array),
                array,
            )
            for name, array in results.items()
        ]
        for output, datatype, array in outputs:
            if output.ref is not None:
                data = raw_bytes(datatype, array)
                self.shm.write(output.ref, data, f"output {output.name!r}")
        content, json_size = encode_response(head, outputs)
        if json_size is None:
            return Response(content, media_type=JSON)
        return Response(
            content, media_type="application/octet-stream", headers={HEADER: str(json_size)}
        )

    def _check_outputs(self, body: InferBody) -> None:
        """Refuse unsupported output parameters, and shared memory places that cannot be
        written, before anything is computed."""
        for output in body.outputs:
            where = f"output {output.name!r}"
            for key, why in UNSUPPORTED_OUTPUT_PARAMETERS.items():
                if key in output.parameters:
                    raise InvalidArgument(f"{where}: parameter {key!r}: {why}")
            if output.ref is not None:
                self.shm.check(output.ref, where)
