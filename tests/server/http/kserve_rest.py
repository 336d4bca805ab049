"""The KServe SDK's REST client against a server (run by the SDK's own venv, .venv-kserve:
its protobuf pin clashes with the project's): ``kserve_rest.py http://HOST:PORT`` prints
one JSON line with the answer to a JSON-tensor request and the error of an unknown model."""

import asyncio
import json
import sys

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig


async def main(url):
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0))
    assert await client.is_server_live(url) and await client.is_server_ready(url)
    assert await client.is_model_ready(url, "ppocr-cls")
    data = np.full((1, 3, 48, 192), 0.5, np.float32)
    tensor = InferInput("x", [1, 3, 48, 192], "FP32")
    tensor.set_data_from_numpy(data, binary_data=False)
    request = InferRequest("ppocr-cls", [tensor], request_id="k1")
    reply = await client.infer(url, request, "ppocr-cls")
    out = reply.outputs[0]
    try:
        await client.infer(url, InferRequest("nope", [tensor]), "nope")
        error = None
    except Exception as exc:
        error = str(exc)
    answer = {"id": reply.id, "name": out.name, "shape": out.shape, "data": out.data}
    print(json.dumps({**answer, "error": error}))
    await client.close()


asyncio.run(main(sys.argv[1]))
