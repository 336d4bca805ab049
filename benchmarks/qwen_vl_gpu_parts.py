"""The parts of benchmarks/bench_qwen_vl_gpu.py: the server it starts, the request it sends,
the vision engine's timing and the transformers side (its module docstring says what each
measures)."""

from __future__ import annotations

import io
import json
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

MAX_TOKENS = 128
QUESTION_TOKENS = 20
SIDE = 448  # the picture's width and height: 32 x 32 patches = 1,024


class Server:
    """``mmaas serve MODEL`` as a subprocess on ports ``port`` (HTTP), +1 (gRPC), +2
    (metrics); ready once its log says SERVING (up to 20 minutes: it compiles first)."""

    def __init__(self, model: Path, port: int, detail: dict[str, Any]) -> None:
        self.model_dir, self.port, self.detail = model, port, detail
        self.url, self.metrics_url = f"127.0.0.1:{port + 1}", f"http://127.0.0.1:{port + 2}"
        text = (model / "model.yaml").read_text()
        self.model = re.search(r"^name: (\S+)", text, re.M).group(1)  # type: ignore[union-attr]
        self.log = model / "serve.log"

    def __enter__(self) -> Server:
        command = [sys.executable, "-m", "mmaas", "serve", str(self.model_dir), "--http-port",
                   str(self.port), "--grpc-port", str(self.port + 1), "--metrics-port",
                   str(self.port + 2)]  # fmt: skip
        started = time.perf_counter()
        with self.log.open("w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while "SERVING" not in self.log.read_text():
            if self.process.poll() is not None or time.perf_counter() - started > 1200:
                self.stop()
                raise RuntimeError(f"mmaas serve did not start: {self.log.read_text()[-3000:]}")
            time.sleep(1)
        lines = self.log.read_text().splitlines()
        self.detail["serve_start_s"] = time.perf_counter() - started
        self.detail["serve_log"] = [
            ln
            for ln in lines
            if re.search(r"KV cache|captured|warmed|SERVING|placed|generation gate|CUDA graphs", ln)
        ][-20:]
        return self

    def __exit__(self, *exc: object) -> None:
        self.detail["serve_log_tail"] = self.log.read_text().splitlines()[-5:]
        self.stop()

    def stop(self) -> None:
        """SIGTERM, then wait (a minute at most)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def gpu_memory_gb(self) -> float | None:
        """The server process's GPU memory in GB (nvidia-smi), or None."""
        query = ["nvidia-smi", "--query-compute-apps=pid,used_memory",
                 "--format=csv,noheader,nounits"]  # fmt: skip
        try:
            rows = subprocess.run(query, capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        used = [int(m) for p, m in (r.split(",") for r in rows.splitlines() if r.strip())
                if int(p) == self.process.pid]  # fmt: skip
        if not used:  # no per-process figures (gVisor): the device's used memory
            query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
            device = subprocess.run(query, capture_output=True, text=True).stdout.split()
            used = [int(device[0])] if device and device[0].isdigit() else []
            self.detail["gpu_mem_source"] = "nvidia-smi memory.used (whole device)"
        return used[0] * 2**20 / 1e9 if used else None


def configuration(model: Path) -> dict[str, Any]:
    """What the figures were measured with: the language engine's precision, the served
    settings (CUDA graphs: the pipeline's decode graphs and the vision buckets), the GPU and
    the packages' versions."""
    import importlib.metadata as metadata

    import yaml

    spec = yaml.safe_load((model / "model.yaml").read_text())
    engines = spec["engines"]
    versions = {}
    for name in ("onnxruntime-gpu", "torch", "transformers", "tokenizers", "mmaas"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    gpu = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    return {
        "language_precision": engines["language"].get("target_precision"),
        "vision_precision": engines["vision"].get("target_precision"),
        "cuda_graphs": {"decode": "pipeline (one per decode batch size)",
                        "vision_buckets": spec["pipeline"]["settings"].get("vision_patch_buckets")},
        "settings": spec["pipeline"]["settings"],
        "gpu": gpu, "versions": versions,
        "request": {"picture": f"{SIDE}x{SIDE}", "question_tokens": QUESTION_TOKENS,
                    "max_tokens": MAX_TOKENS, "eos_ignored": True},
    }  # fmt: skip


def server_ttft(metrics_url: str) -> tuple[float, int]:
    """(sum, count) of the server's time-to-first-token histogram."""
    text = urllib.request.urlopen(f"{metrics_url}/metrics", timeout=10).read().decode()
    total = re.search(r"^mmaas_time_to_first_token_seconds_sum\{[^}]*\} (\S+)", text, re.M)
    count = re.search(r"^mmaas_time_to_first_token_seconds_count\{[^}]*\} (\S+)", text, re.M)
    return (float(total.group(1)) if total else 0.0, int(float(count.group(1))) if count else 0)


def picture(side: int = SIDE) -> bytes:
    """A deterministic side x side PNG (colour ramps and a disc): the request's picture."""
    y, x = np.mgrid[0:side, 0:side]
    disc = ((x - side / 2) ** 2 + (y - side / 2) ** 2 < (side / 4) ** 2) * 120
    rgb = np.stack([x * 255 // side, y * 255 // side, (disc + 60) % 256], -1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def question(tokenizer: Path, tokens: int = QUESTION_TOKENS) -> str:
    """A question of ``tokens`` tokens in the model's tokenizer."""
    from tokenizers import Tokenizer

    sentence = (
        "Please describe in detail every object, colour, shape and texture you can see "
        "in this picture, and say what it might show, in plain simple words"
    )
    words = sentence.split(" ")
    encoder = Tokenizer.from_file(str(tokenizer))
    for count in range(len(words), 0, -1):
        text = " ".join(words[:count])
        if len(encoder.encode(text, add_special_tokens=False).ids) <= tokens:
            return text
    return words[0]


def parity_prompts() -> list[tuple[str, list[bytes]]]:
    """The generation gate's 8 prompts (pictures as PNG bytes, question)."""
    from mmaas.pipelines.qwen2_vl.export.gate import QUESTIONS, pictures

    sets = [[_png(image) for image in images] for images in pictures()]
    return [(QUESTIONS[i // 2 % 4], sets[i % 4]) for i in range(8)]


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def vision_ms(model: Path) -> float:
    """The compiled vision engine, loaded by mmaas's back end here, on one 1,024-patch
    picture padded by the runtime to its bucket: median ms of 20 runs after 3."""
    from mmaas.backends import get_runtime
    from mmaas.core.manifest import read_manifest
    from mmaas.pipelines.qwen2_vl.runtime.embeddings import ImageEmbeddings
    from mmaas.pipelines.qwen2_vl.runtime.pipeline import Settings

    directory = model / ".mmaas" / "engines" / "vision"  # the compiled engine mmaas serve made
    manifest = read_manifest(directory)
    engine = get_runtime(manifest.model.backend).load(directory, manifest)
    text = (model / ".mmaas" / "model" / "manifest.json").read_text()
    settings = Settings.read(json.loads(text).get("pipeline", {}).get("settings", {}))
    grid = next(t for t in manifest.model.inputs if t.name == "grid_thw")
    runs = ImageEmbeddings(engine, 2, grid.max[0] if grid.max else 1,
                           settings.vision_patch_buckets, 0)  # fmt: skip
    pixels = np.random.default_rng(0).standard_normal((1024, 1176)).astype(np.float32)
    times = []
    for index in range(23):
        started = time.perf_counter()
        runs.run(pixels, [(1, 32, 32)])
        if index >= 3:
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def transformers_figures(checkpoint: Path, text: str | None) -> tuple[dict[str, Any], list]:
    """transformers' c=1 TTFT and TPOT (ms), c=16 tok/s, and its parity tokens."""
    import torch

    from mmaas.pipelines.qwen2_vl.export.reference import Reference

    device = "cuda" if torch.cuda.is_available() else "cpu"
    reference = Reference(checkpoint, dtype=torch.bfloat16, attn_implementation="sdpa")
    reference.model.to(device)
    image = Image.open(io.BytesIO(picture()))
    inputs = reference.inputs([image], text or "Describe this picture.").to(device)

    @torch.no_grad()
    def timed(new: int, batch: dict[str, Any]) -> float:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        started = time.perf_counter()
        reference.model.generate(**batch, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        sync()
        return time.perf_counter() - started

    timed(4, inputs)
    first = statistics.median(timed(1, inputs) for _ in range(3))
    whole = statistics.median(timed(MAX_TOKENS, inputs) for _ in range(3))
    many = reference.processor(text=[reference.prompt(1, text or "")] * 16, images=[image] * 16,
                               padding=True, return_tensors="pt").to(device)  # fmt: skip
    figures = {"ttft_ms_c1": first * 1000, "tpot_ms_c1": (whole - first) / (MAX_TOKENS - 1) * 1000,
               "tok_s_c16": 16 * MAX_TOKENS / timed(MAX_TOKENS, many)}  # fmt: skip
    ids = []
    for question_text, images in parity_prompts():
        pictures = [Image.open(io.BytesIO(data)) for data in images]
        batch = reference.inputs(pictures, question_text).to(device)
        with torch.no_grad():
            out = reference.model.generate(**batch, max_new_tokens=32, do_sample=False)
        ids.append(out[0, batch["input_ids"].shape[1] :].tolist())
    return figures, ids
