"""Scalars as Triton declares them, so Triton's tools load them: a rank-0 tensor is
advertised as [1] (ModelConfig dims [1] + reshape { shape: [] }), a batch-only one as
[-1, 1]; requests may send either shape; perf_analyzer runs the real silero-vad (its
scalar sample rate) with ``--input-data``, and ``mmaas bench`` runs it with the model's
sample_values or the same ``--input-data`` file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from click.testing import CliRunner

from mmaas.bench.load import BenchRequest, run
from mmaas.cli.bench import command
from mmaas.core.errors import UsageError

from . import graphs
from .conftest import RunningServer, compiled_graph

PERF_ANALYZER = Path(sys.executable).parent / "perf_analyzer"


@pytest.fixture(scope="module")
def silero(module_server: Callable[..., RunningServer], silero_dir: Path) -> RunningServer:
    return module_server(silero_dir)


@pytest.fixture(scope="module")
def scalars(
    module_server: Callable[..., RunningServer], tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    return module_server(compiled_graph(tmp_path_factory, graphs.scalars_model))


@pytest.fixture(scope="module")
def batch_only(
    module_server: Callable[..., RunningServer], tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    return module_server(compiled_graph(tmp_path_factory, graphs.batch_only_model))


@pytest.fixture(scope="module")
def silero_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two requests in perf_analyzer's --input-data format: 16 kHz and 8 kHz chunks."""
    rng = np.random.default_rng(3)
    steps = [
        {
            "input": {"content": rng.uniform(-1, 1, samples).tolist(), "shape": [1, samples]},
            "state": {"content": [0.0] * 256, "shape": [2, 1, 128]},
            "sr": [rate],
        }
        for rate, samples in ((16000, 512), (8000, 256))
    ]
    path = tmp_path_factory.mktemp("data") / "silero.json"
    path.write_text(json.dumps({"data": steps}))
    return path


def test_metadata_and_config_advertise_scalars_as_triton(scalars: RunningServer) -> None:
    for client in (
        triton_grpc.InferenceServerClient(scalars.url),
        triton_http.InferenceServerClient(scalars.http_url),
    ):
        as_json = {"as_json": True} if isinstance(client, triton_grpc.InferenceServerClient) else {}
        metadata = client.get_model_metadata("scalars", **as_json)
        shapes = {t["name"]: [int(d) for d in t["shape"]] for t in metadata["inputs"]}
        shapes |= {t["name"]: [int(d) for d in t["shape"]] for t in metadata["outputs"]}
        assert shapes == {"gain": [1], "x": [-1], "y": [-1], "total": [1]}
        config = client.get_model_config("scalars", **as_json)
        config = config.get("config", config)
        tensors = {t["name"]: t for t in (*config["input"], *config["output"])}
        assert [int(d) for d in tensors["gain"]["dims"]] == [1]
        assert tensors["gain"]["reshape"] == {} or tensors["gain"]["reshape"]["shape"] == []
        assert "reshape" in tensors["total"] and "reshape" not in tensors["x"]


@pytest.mark.parametrize("gain_shape", [[1], []], ids=["advertised", "declared"])
def test_a_scalar_is_taken_in_either_shape_and_answered_as_advertised(
    scalars: RunningServer, gain_shape: list[int]
) -> None:
    client = triton_http.InferenceServerClient(scalars.http_url)
    gain = triton_http.InferInput("gain", gain_shape, "FP32")
    gain.set_data_from_numpy(np.full(gain_shape, 2.0, np.float32))
    x = triton_http.InferInput("x", [3], "FP32")
    x.set_data_from_numpy(np.array([1, 2, 3], np.float32))
    result = client.infer("scalars", [gain, x])
    np.testing.assert_array_equal(result.as_numpy("y"), [2, 4, 6])
    assert result.as_numpy("total").shape == (1,) and result.as_numpy("total")[0] == 12


def test_a_batch_only_tensor_is_dims_1_with_reshape(batch_only: RunningServer) -> None:
    client = batch_only.client()
    metadata = client.get_model_metadata("batch-only")
    assert list(metadata.inputs[0].shape) == [-1, 1] and list(metadata.outputs[0].shape) == [-1, 1]
    config = client.get_model_config("batch-only").config
    assert list(config.input[0].dims) == [1] and config.input[0].HasField("reshape")
    for shape in ([2, 1], [2]):
        tensor = triton_grpc.InferInput("n", shape, "INT64")
        tensor.set_data_from_numpy(np.array([5, 7], np.int64).reshape(shape))
        twice = client.infer("batch-only", [tensor]).as_numpy("twice")
        np.testing.assert_array_equal(twice, [[10], [14]])


def perf_analyzer(server: RunningServer, protocol: str, *flags: str) -> subprocess.CompletedProcess:
    url = server.url if protocol == "grpc" else server.http_url
    argv = [str(PERF_ANALYZER), "-m", "silero-vad", "-i", protocol, "-u", url]
    argv += ["--concurrency-range", "2", "-p", "1000", "--max-trials", "3"]
    argv += ["--stability-percentage", "999", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_perf_analyzer_runs_silero_vad_with_input_data(
    silero: RunningServer, silero_data: Path, protocol: str
) -> None:
    done = perf_analyzer(silero, protocol, "--input-data", str(silero_data))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unable to set shape" not in done.stdout + done.stderr
    throughput = re.search(r"Throughput: ([\d.]+) infer/sec", done.stdout)
    assert throughput and float(throughput.group(1)) > 0, done.stdout
    stats = silero.client().get_inference_statistics("silero-vad").model_stats[0]
    assert stats.inference_stats.fail.count == 0


def test_bench_sends_the_sample_values_by_default(silero: RunningServer) -> None:
    shapes = {"input": (1, 512), "state": (2, 1, 128)}
    (result,) = run(BenchRequest(url=silero.url, model="silero-vad", shapes=shapes, max_requests=8))
    assert result.requests == 8 and result.errors == 0, result.error_samples


def test_bench_takes_perf_analyzers_input_data(silero: RunningServer, silero_data: Path) -> None:
    argv = [silero.url, "-m", "silero-vad", "--input-data", str(silero_data), "-c", "2"]
    outcome = CliRunner().invoke(command, [*argv, "--max-requests", "10", "--json"])
    assert outcome.exit_code == 0, outcome.output
    level = json.loads(outcome.output)["levels"][0]
    assert level["requests"] == 10 and level["errors"] == 0, level


@pytest.mark.parametrize(
    ("state", "sr", "fragment"),
    [
        ([0.0], [16000], "input 'state': shape [2, -1, 128] has dynamic dims"),
        ({"content": [0.0] * 256, "shape": [2, 1, 128]}, [1.5], "input 'sr': value 1.5"),
    ],
    ids=["no-shape", "fraction"],
)
def test_bench_names_the_entry_and_input_of_bad_input_data(
    silero: RunningServer, tmp_path: Path, state: object, sr: list, fragment: str
) -> None:
    data = tmp_path / "bad.json"
    data.write_text(json.dumps({"data": [{"input": [0.5] * 512, "state": state, "sr": sr}]}))
    argv = [silero.url, "-m", "silero-vad", "--input-data", str(data), "--shape", "input:1x512"]
    outcome = CliRunner().invoke(command, argv)
    assert isinstance(outcome.exception, UsageError), outcome.output
    assert f"--input-data {data}: data[0]: {fragment}" in outcome.exception.message
