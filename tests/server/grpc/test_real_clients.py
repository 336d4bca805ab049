"""Real clients nobody here wrote, over gRPC, against the real server (subprocess):
perf_analyzer 2.51 (plain, ``--shared-memory system``, ``--streaming``) with non-zero
server-side statistics, and the KServe SDK's ``InferenceGRPCClient`` (its own venv,
``.venv-kserve``, made by scripts/install_clients.sh: kserve pins protobuf<7)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from paths import ROOT

from ..conftest import RunningServer

PERF_ANALYZER = Path(sys.executable).parent / "perf_analyzer"
KSERVE_PYTHON = ROOT / ".venv-kserve" / "bin" / "python"


def perf_analyzer(server: RunningServer, *flags: str) -> str:
    """One short perf_analyzer run at concurrency 2 on ppocr-cls 1x3x48x192; its output."""
    argv = [
        str(PERF_ANALYZER),
        "-m",
        "ppocr-cls",
        "-i",
        "grpc",
        "-u",
        server.url,
        "--shape",
        "x:1,3,48,192",
        "--concurrency-range",
        "2",
        "-p",
        "1000",
        "--max-trials",
        "3",
        "--stability-percentage",
        "999",
        *flags,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags", [(), ("--shared-memory", "system"), ("--streaming",)], ids=["plain", "shm", "stream"]
)
def test_perf_analyzer_reports_server_side_statistics(cls: RunningServer, flags) -> None:
    before = set(os.listdir("/dev/shm"))
    out = perf_analyzer(cls, *flags)
    client = re.search(r"Throughput: ([\d.]+) infer/sec", out)
    server = re.search(r"Server:\s+Inference count: (\d+)", out)
    latency = re.search(r"Avg request latency: (\d+) usec \(overhead", out)
    assert client and float(client.group(1)) > 0, out
    assert server and int(server.group(1)) > 0, out  # the version policy: stats under "1"
    assert latency and int(latency.group(1)) > 0, out
    assert set(os.listdir("/dev/shm")) <= before, "perf_analyzer left shared memory behind"
    assert cls.client().get_system_shared_memory_status().regions == {}


KSERVE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import numpy as np
    from kserve import InferenceGRPCClient, InferInput, InferRequest

    async def main(url):
        client = InferenceGRPCClient(url)
        assert await client.is_server_ready() and await client.is_server_live()
        assert await client.is_model_ready("ppocr-cls")
        data = np.load(sys.argv[2])
        tensor = InferInput("x", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data, binary_data=True)
        request = InferRequest(model_name="ppocr-cls", infer_inputs=[tensor], request_id="k1")
        result = await client.infer(request)
        out = result.outputs[0]
        answer = {"id": result.id, "name": out.name, "version": result.model_version}
        print(json.dumps({**answer, "data": out.as_numpy().tolist()}))
        await client.close()

    asyncio.run(main(sys.argv[1]))
    """
)


def test_the_kserve_sdk_grpc_client(
    cls: RunningServer, tmp_path: Path, ppocr_models: dict[str, Path]
) -> None:
    if not KSERVE_PYTHON.exists():
        pytest.fail("the KServe SDK venv is missing: run scripts/setup.sh")
    image = np.random.default_rng(11).random((2, 3, 48, 192), dtype=np.float32)
    np.save(tmp_path / "x.npy", image)
    script = tmp_path / "kserve_client.py"
    script.write_text(KSERVE_SCRIPT)
    done = subprocess.run(
        [str(KSERVE_PYTHON), str(script), cls.url, str(tmp_path / "x.npy")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    import json

    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["id"] == "k1" and answer["version"] == "1"
    assert answer["name"] == "save_infer_model/scale_0.tmp_1"
    session = ort.InferenceSession(
        str(ppocr_models["ppocr-cls"]), providers=["CPUExecutionProvider"]
    )
    (want,) = session.run(None, {"x": image})
    np.testing.assert_allclose(np.array(answer["data"], np.float32), want, atol=1e-5)
