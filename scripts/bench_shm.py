"""System shared memory clients for scripts/bench_runtime.py: the inputs are written once
to POSIX shared memory objects (tritonclient's ``shared_memory`` utilities), registered
with the server, and every request names the regions instead of carrying the data; the
outputs are written by the server into a region of their own (Triton's shared-memory
extension). Over HTTP/REST a request is then ~300 bytes of JSON each way."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Mapping

import numpy as np
import tritonclient.utils.shared_memory as shm


class HttpShmClient:
    """One keep-alive HTTP connection to the server's ``http_port`` sending ``/infer``
    requests for ``model`` whose inputs and outputs live in registered regions."""

    def __init__(
        self,
        http_port: int,
        model: str,
        inputs: Mapping[str, np.ndarray],
        datatypes: Mapping[str, str],
        outputs: Mapping[str, int],
    ) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=120)
        self.path = f"/v2/models/{model}/infer"
        self.handles: list[tuple[str, object]] = []
        tag = uuid.uuid4().hex[:8]
        tensors, requested = [], []
        for name, array in inputs.items():
            region = self._region(f"in-{tag}-{len(self.handles)}", array.nbytes)
            shm.set_shared_memory_region(self.handles[-1][1], [np.ascontiguousarray(array)])
            tensors.append(
                {
                    "name": name,
                    "datatype": datatypes[name],
                    "shape": list(array.shape),
                    "parameters": {
                        "shared_memory_region": region,
                        "shared_memory_byte_size": array.nbytes,
                    },
                }
            )
        for name, size in outputs.items():
            region = self._region(f"out-{tag}-{len(self.handles)}", size)
            parameters = {"shared_memory_region": region, "shared_memory_byte_size": size}
            requested.append({"name": name, "parameters": parameters})
        self.body = json.dumps({"inputs": tensors, "outputs": requested}).encode()

    def call(self) -> float:
        """One request; its latency in ms."""
        started = time.perf_counter()
        self.connection.request("POST", self.path, self.body, {"Content-Type": "application/json"})
        reply = self.connection.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"shared memory infer failed: HTTP {reply.status}: {data[:200]!r}")
        return (time.perf_counter() - started) * 1000

    def close(self) -> None:
        """Unregister and destroy every region."""
        for region, handle in self.handles:
            self._post(f"/v2/systemsharedmemory/region/{region}/unregister", {})
            shm.destroy_shared_memory_region(handle)
        self.connection.close()

    def _region(self, region: str, size: int) -> str:
        key = f"/mmaas-bench-{region}"
        handle = shm.create_shared_memory_region(region, key, size)
        self.handles.append((region, handle))
        body = {"key": key, "offset": 0, "byte_size": size}
        self._post(f"/v2/systemsharedmemory/region/{region}/register", body)
        return region

    def _post(self, path: str, document: dict) -> None:
        self.connection.request("POST", path, json.dumps(document).encode())
        reply = self.connection.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"POST {path}: HTTP {reply.status}: {data[:200]!r}")
