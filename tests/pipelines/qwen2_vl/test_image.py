"""models/qwen-vl end to end on a real Docker engine: `mmaas build` from a clean state (a fresh
engine cache, a new image), the container, and real clients (tritonclient gRPC, the example
client). Greedy output_ids for two real pictures of different sizes x two prompts equal
transformers' ``Qwen2VLForConditionalGeneration.generate(do_sample=False)`` on the checkpoint;
the stream equals the unary answer; a seeded sampled answer is the same twice; concurrent
streams overlap; every bad input gets INVALID_ARGUMENT naming what is wrong and the server
keeps serving; the vision engine serves embeddings and refuses a grid that does not fit its
patches; tampering with either engine or an asset makes the container refuse to start.

One image and one container for the whole module (CI budget)."""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from PIL import Image
from scripts import qwen_vl_client as client
from tritonclient.utils import InferenceServerException

from docker_fixtures import (
    Container,
    run_container,
    run_to_exit,
    tampered_image,
    wait_for_grpc_serving,
)
from mmaas.core import proc

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PAIR = ("grace_hopper.jpg", "rocket.jpg")  # 512x600 and 640x427
PROMPTS = ("Describe this picture.", "What is the person in the image holding, and why?")
FILES = ("model.yaml", "qwen2_vl_vision.onnx", "qwen2_vl_language.onnx", "runtime.json",
         "tokenizer.json", "embed_tokens.npy")  # fmt: skip
MODEL_DIR = "/opt/mmaas/model"


@pytest.fixture(scope="module")
def built(
    docker_cli: list[str], base_image: str, qwen_vl_export: Path, tmp_path_factory
) -> Iterator[str]:
    """The image `mmaas build` makes of a copy of models/qwen-vl, with a fresh engine cache
    and its own tag; removed afterwards."""
    root = tmp_path_factory.mktemp("qwen-vl-image")
    folder = root / "qwen-vl"
    folder.mkdir()
    for name in FILES:
        shutil.copy(qwen_vl_export / name, folder / name)
    tag = secrets.token_hex(4)
    with (folder / "model.yaml").open("a") as spec:
        spec.write(f"image: {{repository: mmaas-test/qwen-vl, tag: '{tag}', "
                   f"base_image: {base_image}}}\n")  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "mmaas"), "build", str(folder), "--json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "MMAAS_CACHE_DIR": str(root / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert {name: e["engine_cache"] for name, e in report["engines"].items()} == {
        "vision": "miss",
        "language": "miss",
    }
    print(f"cold build of models/qwen-vl: {time.perf_counter() - started:.0f} s")
    image = f"mmaas-test/qwen-vl:{tag}"
    yield image
    proc.run([*docker_cli, "image", "rm", "--force", image], check=False)


@pytest.fixture(scope="module")
def server(docker_cli: list[str], built: str) -> Iterator[Container]:
    with run_container(docker_cli, built, ports=[8001]) as container:
        wait_for_grpc_serving(container.port, timeout=120, container=container)
        yield container


@pytest.fixture(scope="module")
def url(server: Container) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def reference(qwen_vl_export: Path):
    from mmaas.pipelines.qwen2_vl.export.reference import Reference

    return Reference(qwen_vl_export / "checkpoint", num_threads=2)


def expected_ids(reference, pictures: Path, names, prompt: str, n: int) -> list[int]:
    images = [Image.open(pictures / name) for name in names]
    return reference.generate(images, prompt, n).new_ids


@pytest.mark.parametrize("prompt", PROMPTS, ids=["describe", "holding"])
@pytest.mark.parametrize("name", PAIR)
def test_greedy_output_ids_equal_transformers(
    url, reference, qwen_vl_pictures, name, prompt
) -> None:
    answer = client.ask(url, "qwen-vl", prompt, [(qwen_vl_pictures / name).read_bytes()],
                        max_tokens=24)  # fmt: skip
    assert answer.ids == expected_ids(reference, qwen_vl_pictures, [name], prompt, 24)
    assert answer.text == reference.tokenizer.decode(answer.ids, skip_special_tokens=True)


def test_the_stream_equals_the_unary_answer(url, qwen_vl_pictures) -> None:
    images = [(qwen_vl_pictures / "rocket.jpg").read_bytes()]
    unary = client.ask(url, "qwen-vl", PROMPTS[1], images, max_tokens=32)
    pieces = list(client.stream(url, "qwen-vl", PROMPTS[1], images, max_tokens=32))
    assert [token for _, token, _ in pieces] == unary.ids
    assert "".join(piece for piece, _, _ in pieces) == unary.text
    assert len(unary.ids) == 32


def test_a_seeded_sampled_answer_is_the_same_twice(url, qwen_vl_pictures) -> None:
    images = [(qwen_vl_pictures / "grace_hopper.jpg").read_bytes()]
    params = {"max_tokens": 24, "temperature": 0.8, "top_p": 0.9, "top_k": 50}
    first = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=1234, **params)
    again = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=1234, **params)
    other = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=99, **params)
    assert first.ids == again.ids != other.ids


def test_concurrent_streams_are_served_together(url, qwen_vl_pictures) -> None:
    """Two short streams start once a long one has its first token; each gets its first
    token while the long one is still streaming (a server that answers one stream at a time
    would finish all 1024 tokens of the long one first). No clock is compared: the long
    stream is cancelled as soon as both short ones have begun."""
    images = [(qwen_vl_pictures / "grace_hopper.jpg").read_bytes()]
    long_started, short_started = threading.Event(), [threading.Event(), threading.Event()]
    long_tokens: list[int] = []
    short_tokens: dict[int, int] = {}

    def long_stream() -> None:
        for _ in client.stream(url, "qwen-vl", PROMPTS[0], images, max_tokens=1024):
            long_tokens.append(1)
            long_started.set()
            if all(event.is_set() for event in short_started):
                return  # both short streams began while this one streamed: cancel it
        long_started.set()  # ended (all tokens, or a stop id) before both short ones began

    def short_stream(index: int) -> None:
        long_started.wait(timeout=120)
        count = 0
        for _ in client.stream(url, "qwen-vl", PROMPTS[0], images, max_tokens=8):
            short_started[index].set()
            count += 1
        short_tokens[index] = count

    threads = [threading.Thread(target=long_stream)]
    threads += [threading.Thread(target=short_stream, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert short_tokens == {0: 8, 1: 8}
    assert 0 < len(long_tokens) < 1024, "the long stream ended before both short ones began"


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def raw_infer(url: str, tensors: list[tuple[str, str, np.ndarray]]) -> None:
    """A ModelInfer of qwen-vl with exactly these (name, datatype, array) inputs."""
    inputs = []
    for name, datatype, array in tensors:
        tensor = triton.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    triton.InferenceServerClient(url).infer("qwen-vl", inputs)


def text(value: str = "Hi") -> tuple[str, str, np.ndarray]:
    return ("text_input", "BYTES", np.array([value.encode()], dtype=object))


def pictures(*data: bytes) -> tuple[str, str, np.ndarray]:
    return ("image", "BYTES", np.array(list(data), dtype=object))


BAD_PARAMETERS = {
    "max_tokens 0": ({"max_tokens": 0}, "'max_tokens': 0 is out of range"),
    "max_tokens -1": ({"max_tokens": -1}, "'max_tokens': -1 is out of range"),
    "max_tokens 2^31-1": ({"max_tokens": 2**31 - 1}, r"exceed the context limit of 4096"),
    "temperature -1": ({"temperature": -1.0}, "'temperature': -1.0 is out of range"),
    "temperature NaN": ({"temperature": float("nan")}, "'temperature': nan is out of range"),
    "temperature inf": ({"temperature": float("inf")}, "'temperature': inf is out of range"),
    "top_p 0": ({"top_p": 0.0}, "'top_p': 0.0 is out of range"),
    "top_p 1.5": ({"top_p": 1.5}, "'top_p': 1.5 is out of range"),
    "top_k -1": ({"top_k": -1}, "'top_k': -1 is out of range"),
    "seed -1": ({"seed": -1}, "'seed': -1 is out of range"),
}


@pytest.mark.parametrize("case", BAD_PARAMETERS, ids=list(BAD_PARAMETERS))
def test_out_of_range_parameters_get_invalid_argument(url, case) -> None:
    params, message = BAD_PARAMETERS[case]
    with pytest.raises(client.ClientError, match=rf"INVALID_ARGUMENT: .*{message}"):
        client.ask(url, "qwen-vl", "Hi", [], **params)


def test_every_bad_request_gets_invalid_argument_and_the_server_keeps_serving(
    url, qwen_vl_pictures
) -> None:
    jpeg = (qwen_vl_pictures / "rocket.jpg").read_bytes()
    one = np.array([1], np.int32)
    big, thin = encode(Image.new("L", (9000, 8000))), encode(Image.new("RGB", (20, 5000)))
    cases = {
        "element 0: not an image Pillow can decode": [text(), pictures(b"not a picture")],
        "cannot decode this JPEG image": [text(), pictures(jpeg[: len(jpeg) // 2])],
        "9000x8000 = 72000000 pixels is over the pixel budget": [text(), pictures(big)],
        "20x5000 has an aspect ratio of 250.0, over Qwen2-VL's limit of 200": [
            text(),
            pictures(thin),
        ],
        r"input 'image': shape \[9\] is outside the optimization profile": [
            text(),
            pictures(*[jpeg] * 9),
        ],
        r"the prompt is \d+ tokens \(\d+ text \+ 0 image tokens\); the context limit is 4096": [
            text("word " * 5000)
        ],
        r"input 'seed': datatype INT64.*expected INT32": [
            text(),
            ("seed", "INT64", np.array([2**40], np.int64)),
        ],
        r"input 'temperature': datatype FP64": [
            text(),
            ("temperature", "FP64", np.array([0.5], np.float64)),
        ],
        r"unknown input 'temprature' in inputs": [
            text(),
            ("temprature", "FP32", np.array([0.5], np.float32)),
        ],
        r"input 'max_tokens': shape \[2\]": [
            text(),
            ("max_tokens", "INT32", np.array([1, 2], np.int32)),
        ],
        r"missing input 'text_input'": [("max_tokens", "INT32", one)],
        r"holds the reserved token <\|image_pad\|>": [text("see <|image_pad|>")],
    }
    for message, tensors in cases.items():
        with pytest.raises(InferenceServerException) as raised:
            raw_infer(url, tensors)
        assert raised.value.status() == "StatusCode.INVALID_ARGUMENT", message
        assert re.search(message, raised.value.message()), (message, raised.value.message())
    answer = client.ask(url, "qwen-vl", "Hi", [jpeg], max_tokens=4)
    assert len(answer.ids) == 4


def test_the_vision_engine_serves_embeddings_and_refuses_a_grid_that_does_not_fit(
    url, qwen_vl_export
) -> None:
    rng = np.random.default_rng(3)
    pixels = rng.random((96, 1176), dtype=np.float32)
    session = ort.InferenceSession(str(qwen_vl_export / "qwen2_vl_vision.onnx"),
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    vision = triton.InferenceServerClient(url)

    def embed(patches: np.ndarray, grid: list[list[int]]) -> np.ndarray:
        inputs = [triton.InferInput("pixel_values", list(patches.shape), "FP32"),
                  triton.InferInput("grid_thw", [len(grid), 3], "INT64")]  # fmt: skip
        inputs[0].set_data_from_numpy(patches)
        inputs[1].set_data_from_numpy(np.array(grid, np.int64))
        return vision.infer("qwen-vl-vision", inputs).as_numpy("image_embeds")

    want = session.run(None, {"pixel_values": pixels, "grid_thw": np.array([[1, 8, 12]])})[0]
    np.testing.assert_allclose(embed(pixels, [[1, 8, 12]]), want, atol=1e-5, rtol=1e-5)
    refused = {
        "98 patches is not a multiple of 4": (np.zeros((98, 1176), np.float32), [[1, 7, 14]]),
        r"\[\[1, 12, 12\]\] describes 144 patches .* 'pixel_values' holds 96": (
            pixels, [[1, 12, 12]]),
        r"row 0 is \[1, 3, 32\]": (pixels, [[1, 3, 32]]),
    }  # fmt: skip
    for message, (patches, grid) in refused.items():
        with pytest.raises(InferenceServerException, match=message) as raised:
            embed(patches, grid)
        assert raised.value.status() == "StatusCode.INVALID_ARGUMENT"


def test_the_example_client_prints_the_streamed_answer(url, qwen_vl_pictures, capsys) -> None:
    picture = str(qwen_vl_pictures / "grace_hopper.jpg")
    assert client.main([picture, "-q", PROMPTS[0], "--url", url, "--max-tokens", "16",
                        "--ids"]) == 0  # fmt: skip
    streamed = capsys.readouterr().out
    assert client.main([picture, "-q", PROMPTS[0], "--url", url, "--max-tokens", "16",
                        "--ids", "--no-stream"]) == 0  # fmt: skip
    assert capsys.readouterr().out == streamed
    refused = "input 'temperature': -1.0 is out of range"
    assert client.main(["-q", "Hi", "--url", url, "--temperature", "-1"]) == 1
    assert refused in capsys.readouterr().err  # a stream's error has a message, no status
    assert client.main(["-q", "Hi", "--url", url, "--temperature", "-1", "--no-stream"]) == 1
    assert f"INVALID_ARGUMENT: {refused}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("vision/model.ort.onnx", "vision/model.ort.onnx: engine does not match its manifest"),
        ("language/model.ort.onnx", "language/model.ort.onnx: engine does not match"),
        ("assets/embed_tokens.npy", "asset 'embed_tokens' does not match its manifest"),
    ],
    ids=["vision-engine", "language-engine", "embedding-table"],
)
def test_tampering_with_either_engine_or_an_asset_refuses_to_start(
    built: str, docker_cli: list[str], path: str, named: str
) -> None:
    tag = f"mmaas-test/qwen-vl:tampered-{secrets.token_hex(4)}"
    with tampered_image(docker_cli, built, f"{MODEL_DIR}/{path}", tag) as tampered:
        code, logs = run_to_exit(docker_cli, tampered)
    assert code == 1
    assert named in logs and "Traceback" not in logs
