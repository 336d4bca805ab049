"""A test-only generating model behind the real HTTP front end (Granian + Starlette +
the request path), for the generate extension's tests: ``python -m server.http.generating
PORT`` (``tests`` on ``sys.path``) serves model ``echo``: ``text_input`` BYTES [1] (+
optional ``max_tokens`` INT32 [1] and ``image`` BYTES [0..4]) -> ``text_output`` BYTES
[1], one response per word every :data:`STEP_S` seconds (an image first answers
``<N-bytes>``, its size); a text holding ``FAIL`` fails after its first word. The
decoupled executor prints ``closed after N words`` on stderr when its iterator ends, so a
test sees when a departing client stopped the generation."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence

import numpy as np

from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.server.context import ServerContext
from mmaas.server.http.routes import create_app
from mmaas.server.http.server import HttpServer
from mmaas.server.metrics import ModelMetrics
from mmaas.server.repository import ConfigFacts, Repository, ServedModel
from mmaas.server.settings import Settings
from mmaas.server.streaming import Response

STEP_S = 0.05


class Echo:
    """The decoupled executor: each word of ``text_input`` is one response."""

    def start(self) -> None: ...

    async def close(self) -> None: ...

    async def infer(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> dict[str, np.ndarray]:
        words = [r.outputs["text_output"][0] async for r in self.responses(inputs, outputs, None)]
        return {"text_output": np.array([b" ".join(words)], dtype=object)}

    async def responses(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str], timeout_s: float | None
    ) -> AsyncIterator[Response]:
        text = inputs["text_input"].reshape(-1)[0]
        images = inputs["image"].reshape(-1) if "image" in inputs else ()
        words = [f"<{len(image)}-bytes>".encode() for image in images] + text.split()
        limit = int(inputs["max_tokens"].reshape(-1)[0]) if "max_tokens" in inputs else len(words)
        sent = 0
        try:
            for index, word in enumerate(words[:limit]):
                await asyncio.sleep(STEP_S)
                if index == 1 and b"FAIL" in text:
                    raise RuntimeError("the language engine failed at step 2")
                sent += 1
                last = index == min(limit, len(words)) - 1
                yield Response({"text_output": np.array([word], dtype=object)}, final=last)
        finally:
            print(f"closed after {sent} words", file=sys.stderr, flush=True)


def echo_model() -> ServedModel:
    info = ModelInfo(
        name="echo",
        version="1",
        backend="test",
        precision="fp32",
        max_batch_size=0,
        inputs=(
            TensorInfo("text_input", "BYTES", (1,)),
            TensorInfo("max_tokens", "INT32", (1,), optional=True),
            TensorInfo("image", "BYTES", (-1,), min=(0,), max=(4,), optional=True),
        ),
        outputs=(TensorInfo("text_output", "BYTES", (1,)),),
    )
    facts = ConfigFacts(platform="test", device_kind="CPU", instance_count=1, batching=False)
    model = ServedModel(info, 1 << 20, ModelMetrics(info.name, info.version), facts, Echo())
    model.state = "ready"
    return model


async def main(port: int) -> None:
    settings = Settings(host="127.0.0.1", http_port=port)
    server = HttpServer(
        create_app(ServerContext.create(Repository([echo_model()])), 30.0), settings
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await server.start()
    print("listening", file=sys.stderr, flush=True)
    await stop.wait()
    await server.stop(1)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
