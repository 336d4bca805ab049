"""models/qwen-vl's image on a real Docker engine refusing what it must: every bad input
and out-of-range parameter gets INVALID_ARGUMENT naming what is wrong and the server keeps
serving; the vision engine serves embeddings and refuses a grid that does not fit its
patches; tampering with either engine or an asset makes the container refuse to start."""

from __future__ import annotations

import io
import re
import secrets

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton
from PIL import Image
from scripts import qwen_vl_client as client
from tritonclient.utils import InferenceServerException

from docker_fixtures import run_to_exit, tampered_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]
MODEL_DIR = "/opt/mmaas/model"


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
        r"send the question as text_input or the conversation as messages": [
            ("max_tokens", "INT32", one)
        ],
        r"input 'messages': not UTF-8 JSON": [("messages", "BYTES", np.array([b"{"], object))],
        r"input 'messages': messages\[0\]: role 'robot' is not one the chat template takes": [
            ("messages", "BYTES", np.array([b'[{"role": "robot", "content": "hi"}]'], object))
        ],
        r"1 image parts, but the 'image' input holds 0 pictures": [
            (
                "messages",
                "BYTES",
                np.array([b'[{"role": "user", "content": [{"type": "image"}]}]'], object),
            )
        ],
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
