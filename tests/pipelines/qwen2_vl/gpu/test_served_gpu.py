"""The qwen2-vl pipeline served from a GPU by the real ``mmaas serve``, talked to with
tritonclient: the language engine's KV cache on the device, its decode steps as CUDA graphs
(captured sizes logged), greedy answers that do not depend on batch-mates (a request alone
and inside a padded batch of 5 give the same ids: C43), streaming equal to the whole
answer, a bad picture refused with INVALID_ARGUMENT while the engine loop goes on, the raw
vision engine served, and the generation metrics on the metrics port.

Marked ``gpu``: they need an NVIDIA GPU and onnxruntime-gpu and are skipped elsewhere.
``MMAAS_GPU_QWEN_MODEL`` names the model folder (``mmaas convert qwen2-vl DIR --device gpu``;
default models/qwen-vl-gpu); scripts/gpu_qwen_vl.sh runs them on the H200.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton
from scripts import qwen_vl_client as client

from paths import ROOT

try:
    import onnxruntime as ort

    HAS_GPU = "CUDAExecutionProvider" in ort.get_available_providers()
except ImportError:
    HAS_GPU = False
HAS_GPU = HAS_GPU and bool(shutil.which("nvidia-smi"))
MODEL = Path(os.environ.get("MMAAS_GPU_QWEN_MODEL", ROOT / "models" / "qwen-vl-gpu"))
QUESTIONS = ("Describe this picture.", "What colours are there?", "Write a haiku.")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not HAS_GPU,
        reason="needs an NVIDIA GPU, nvidia-smi and onnxruntime-gpu "
        "(scripts/gpu_qwen_vl.sh runs these on the H200)",
    ),
]


class Served:
    """The running server: its gRPC url, metrics url, served name and log file."""

    def __init__(self, url: str, metrics: str, name: str, log: Path) -> None:
        self.url, self.metrics, self.name, self.log = url, metrics, name, log


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``mmaas serve MODEL`` on free ports, until the module ends."""
    sockets = [socket.socket() for _ in range(3)]
    for sock in sockets:  # all bound at once: three different ports
        sock.bind(("127.0.0.1", 0))
    http, grpc_port, metrics = (sock.getsockname()[1] for sock in sockets)
    for sock in sockets:
        sock.close()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    name = re.search(r"^name: (\S+)", (MODEL / "model.yaml").read_text(), re.M).group(1)  # type: ignore[union-attr]
    argv = [sys.executable, "-m", "mmaas", "serve", str(MODEL), "--http-port", str(http),
            "--grpc-port", str(grpc_port), "--metrics-port", str(metrics)]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 900
    while "SERVING" not in log.read_text():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)
    yield Served(f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{metrics}", name, log)
    process.terminate()
    process.wait(60)


def picture(seed: int) -> bytes:
    """A small deterministic PNG."""
    import io

    from PIL import Image

    rgb = np.random.default_rng(seed).integers(0, 255, (112, 140, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_decode_steps_run_as_cuda_graphs_and_the_cache_is_sized(served: Served) -> None:
    text = served.log.read_text()
    assert re.search(r"decode CUDA graphs captured at batch 1, 2, 4", text), text[-2000:]
    assert re.search(r"KV cache: \d+ sequences in \d+ slots x \d+ tokens", text)


def test_greedy_ids_do_not_depend_on_batch_mates(served: Served) -> None:
    alone = [client.ask(served.url, served.name, q, [picture(i)], max_tokens=24).ids
             for i, q in enumerate(QUESTIONS)]  # fmt: skip
    together: dict[int, list[int]] = {}

    def one(index: int) -> None:
        q = QUESTIONS[index % 3]
        together[index] = client.ask(served.url, served.name, q, [picture(index % 3)],
                                     max_tokens=24).ids  # fmt: skip

    threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [together[i] for i in range(5)] == [alone[i % 3] for i in range(5)]
    assert all(len(ids) == 24 or ids[-1] in (151645, 151643, 3988, 3986) for ids in alone)


def test_a_stream_equals_the_whole_answer(served: Served) -> None:
    whole = client.ask(served.url, served.name, QUESTIONS[0], [picture(7)], max_tokens=16)
    pieces = list(client.stream(served.url, served.name, QUESTIONS[0], [picture(7)],
                                max_tokens=16))  # fmt: skip
    assert [token for _, token, _ in pieces] == whole.ids


def test_a_bad_picture_is_refused_and_the_engine_goes_on(served: Served) -> None:
    with pytest.raises(client.ClientError, match=r"INVALID_ARGUMENT.*image"):
        client.ask(served.url, served.name, "Hi", [b"not a picture"], max_tokens=4)
    assert len(client.ask(served.url, served.name, "Hi", [picture(1)], max_tokens=4).ids) >= 1


def test_the_vision_engine_is_served_raw(served: Served) -> None:
    grpc = triton.InferenceServerClient(served.url)
    pixels = triton.InferInput("pixel_values", [16, 1176], "FP32")
    pixels.set_data_from_numpy(np.zeros((16, 1176), np.float32))
    grid = triton.InferInput("grid_thw", [1, 3], "INT64")
    grid.set_data_from_numpy(np.array([[1, 4, 4]], np.int64))
    result = grpc.infer(f"{served.name}-vision", [pixels, grid])
    assert result.as_numpy("image_embeds").shape[0] == 4


def test_the_generation_metrics_are_exposed(served: Served) -> None:
    client.ask(served.url, served.name, "Hi", [], max_tokens=3)
    text = urllib.request.urlopen(f"{served.metrics}/metrics", timeout=10).read().decode()
    count = re.search(r"^mmaas_time_to_first_token_seconds_count\{[^}]*\} (\d+)", text, re.M)
    assert count and int(count.group(1)) >= 1
    slots = re.search(r"^mmaas_kv_cache_slots\{[^}]*\} (\d+)", text, re.M)
    assert slots and int(slots.group(1)) >= 1
    assert re.search(r"^mmaas_inter_token_latency_seconds_bucket\{", text, re.M)
