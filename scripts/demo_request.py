"""Send one real OCR text-detection request to a running mmaas server and check it.

Renders a picture with text in it (Pillow), preprocesses it the way PP-OCR's DBNet
detector expects (RGB, scaled to [0, 1], ImageNet mean/std, CHW, sides multiples of 32),
sends it with ``tritonclient.grpc`` (KServe v2 ``ModelInfer``), and prints the
probability map's shape, how many pixels it marks as text, and, with ``--onnx``, the
largest difference from in-process ONNX Runtime on the original model.

Usage: ``python scripts/demo_request.py --url 127.0.0.1:8001 --size 640x640
[--onnx models/ppocr-det/ch_PP-OCRv4_det_infer.onnx]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
TEXT = ("mmaas serves ONNX models", "over KServe v2 gRPC", "PP-OCRv4 text detection")


def render_text_image(width: int, height: int) -> Image.Image:
    """A white RGB picture of ``width`` x ``height`` pixels with three lines of black text."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(12, height // 16))
    for row, line in enumerate(TEXT):
        draw.text((width // 16, height // 8 + row * height // 4), line, fill="black", font=font)
    return image


def det_input(image: Image.Image) -> np.ndarray:
    """PP-OCR det preprocessing: float32 ``[1, 3, H, W]``, H and W rounded down to
    multiples of 32, normalised with ImageNet mean and std."""
    width, height = (max(32, image.width // 32 * 32), max(32, image.height // 32 * 32))
    pixels = np.asarray(image.convert("RGB").resize((width, height)), dtype=np.float32) / 255
    return ((pixels - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)


def infer(url: str, model: str, array: np.ndarray) -> tuple[np.ndarray, float]:
    """One KServe v2 ModelInfer of input ``x``; returns the first output and latency in ms."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url=url)
    metadata = client.get_model_metadata(model, as_json=True)
    tensor = grpcclient.InferInput(metadata["inputs"][0]["name"], list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    started = time.perf_counter()
    result = client.infer(model, [tensor])
    latency_ms = (time.perf_counter() - started) * 1000
    return result.as_numpy(metadata["outputs"][0]["name"]), latency_ms


def main() -> None:
    """Command-line entry; prints one JSON line with the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="127.0.0.1:8001")
    parser.add_argument("--model", default="ppocr-det")
    parser.add_argument("--size", default="640x640", help="WIDTHxHEIGHT of the picture")
    parser.add_argument("--onnx", type=Path, help="compare with ONNX Runtime on this file")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    array = det_input(render_text_image(width, height))
    output, latency_ms = infer(args.url, args.model, array)
    report = {
        "model": args.model,
        "input_shape": list(array.shape),
        "output_shape": list(output.shape),
        "latency_ms": round(latency_ms, 1),
        "text_pixels": int((output > 0.3).sum()),
    }
    if args.onnx:
        import onnxruntime as ort

        session = ort.InferenceSession(str(args.onnx), providers=["CPUExecutionProvider"])
        expected = session.run(None, {session.get_inputs()[0].name: array})[0]
        report["max_abs_diff_vs_onnxruntime"] = float(np.abs(expected - output).max())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
