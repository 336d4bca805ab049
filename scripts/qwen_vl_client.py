"""Example client of the ``qwen-vl`` image: one image file in, its Qwen2-VL image embeddings out.

Preprocessing is transformers' own Qwen2-VL image processor (``Qwen2VLImageProcessorPil``,
constructed locally, nothing fetched): convert to RGB, resize so both sides are multiples of
28 (patch 14 x merge 2) with the pixel count inside the served profile (224x224 to
1344x1344), rescale to [0, 1], normalize with the CLIP mean/std, and cut into
``pixel_values`` FP32 [num_patches, 1176] plus ``grid_thw`` INT64 [1, 3].

The request goes through ``tritonclient.grpc`` (KServe v2 ``ModelInfer``) to ``--url``; with
``--local MODEL.onnx`` the same arrays run in-process in ONNX Runtime instead, for comparing.
Prints one line: output name, shape, dtype, sum and the sha256 of the raw FP32 bytes.

Usage: ``python scripts/qwen_vl_client.py IMAGE [--url localhost:8001] [--model qwen-vl]
[--local MODEL.onnx]``. Exit 1 with one line on stderr when the image or the server fails.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError
from transformers import Qwen2VLImageProcessorPil

MIN_PIXELS = 224 * 224  # the profile's min: 16x16 = 256 patches
MAX_PIXELS = 1344 * 1344  # the profile's max: 96x96 = 9216 patches
OUTPUT = "image_embeds"


class ClientError(Exception):
    """The server or ONNX Runtime refused the request (the message is theirs)."""


def image_processor() -> Qwen2VLImageProcessorPil:
    """transformers' Qwen2-VL processor with its default config (CLIP mean/std, bicubic,
    patch 14, temporal patch 2, merge 2), its pixel bounds set to the served profile's."""
    return Qwen2VLImageProcessorPil(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS})


def preprocess(image_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``pixel_values`` FP32 [num_patches, 1176] and ``grid_thw`` INT64 [1, 3] of one image;
    ``num_patches = h * w`` with ``(h, w) = (height, width) / 14`` after the resize.

    Raises:
        OSError: the file is missing or is not an image Pillow can read.
    """
    try:
        with Image.open(image_path) as image:
            batch = image_processor()(images=image.convert("RGB"), return_tensors="np")
    except UnidentifiedImageError as exc:
        raise OSError(f"{image_path}: not an image Pillow can read") from exc
    return (batch["pixel_values"].astype(np.float32), batch["image_grid_thw"].astype(np.int64))


def infer_remote(
    url: str, model: str, pixel_values: np.ndarray, grid_thw: np.ndarray
) -> np.ndarray:
    """One KServe v2 ``ModelInfer`` call through tritonclient's gRPC client; returns
    ``image_embeds`` FP32 [num_patches / 4, hidden]. tritonclient's channel allows 2 GiB
    messages, so the largest profile input (9216 x 1176 FP32, 43 MB) fits.

    Raises:
        ClientError: the server is unreachable or refuses the request.
    """
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    inputs = [
        grpcclient.InferInput("pixel_values", list(pixel_values.shape), "FP32"),
        grpcclient.InferInput("grid_thw", list(grid_thw.shape), "INT64"),
    ]
    inputs[0].set_data_from_numpy(pixel_values)
    inputs[1].set_data_from_numpy(grid_thw)
    try:
        with grpcclient.InferenceServerClient(url) as client:
            result = client.infer(model, inputs, outputs=[grpcclient.InferRequestedOutput(OUTPUT)])
    except InferenceServerException as exc:
        raise ClientError(f"{url}: {exc}") from exc
    return result.as_numpy(OUTPUT)


def infer_local(onnx_path: Path, pixel_values: np.ndarray, grid_thw: np.ndarray) -> np.ndarray:
    """The same inputs through ONNX Runtime (CPU) in-process; returns ``image_embeds``.

    Raises:
        ClientError: ONNX Runtime cannot load the file or run it on these inputs.
    """
    import onnxruntime as ort

    try:
        session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        return session.run([OUTPUT], {"pixel_values": pixel_values, "grid_thw": grid_thw})[0]
    except Exception as exc:  # ONNX Runtime's exception classes derive from Exception only
        raise ClientError(f"{onnx_path}: {exc}") from exc


def describe(embeddings: np.ndarray) -> str:
    """``image_embeds [256, 1536] float32 sum=<%.6g> sha256=<hex>``: the sha256 is of the
    C-order FP32 bytes, equal only for bit-identical outputs; the sum tolerates rounding."""
    data = np.ascontiguousarray(embeddings, dtype=np.float32)
    digest = hashlib.sha256(data.tobytes()).hexdigest()
    return (
        f"{OUTPUT} {list(data.shape)} float32 sum={float(data.sum(dtype=np.float64)):.6g} "
        f"sha256={digest}"
    )


def main(argv: list[str]) -> int:
    """Preprocess, infer (remote or ``--local``), print the description; exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("image", type=Path)
    parser.add_argument("--url", default="localhost:8001", help="KServe v2 gRPC host:port")
    parser.add_argument("--model", default="qwen-vl", help="model name on the server")
    parser.add_argument(
        "--local",
        type=Path,
        metavar="MODEL.onnx",
        help="run in-process ONNX Runtime on this export instead of a server",
    )
    args = parser.parse_args(argv)
    try:
        pixel_values, grid_thw = preprocess(args.image)
        print(f"pixel_values {list(pixel_values.shape)} grid_thw {grid_thw.tolist()}")
        embeddings = (
            infer_local(args.local, pixel_values, grid_thw)
            if args.local
            else infer_remote(args.url, args.model, pixel_values, grid_thw)
        )
    except (OSError, ClientError) as exc:
        print(f"qwen_vl_client: error: {exc}", file=sys.stderr)
        return 1
    print(describe(embeddings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
