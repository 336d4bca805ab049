"""Serve GPU models with ``mmaas serve`` and answer tritonclient requests from the same host;
compare the answers with ONNX Runtime's CPU provider on the original ONNX graph.

    python scripts/gpu_serve_check.py MODEL_DIR... --out results.json
    python scripts/gpu_serve_check.py MODEL_DIR --self-check

``--self-check`` (first in scripts/gpu_run.sh, before anything is measured): ``mmaas serve``
of the model starts, answers one request and reports KIND_GPU, else exit 1 with its log.

Each MODEL_DIR is a GPU variant (scripts/gpu_models.py). For each: ``mmaas serve`` starts
(compile into MODEL_DIR/.mmaas/engine: the build's profile check and gates run on the
GPU), the script waits for readiness, sends KServe v2 requests with ``tritonclient.grpc``
(ppocr-det: a rendered text page at 1x3x640x640, and a batch of 3; qwen-vl: 1024 patches,
grid_thw [[1, 32, 32]]), compares each output with ONNX Runtime CPU on the source ONNX
file, reads ``/metrics`` (the nv_gpu_* lines) and stops the server with SIGTERM.

Tolerances. fp32 (``use_tf32=0``): max abs diff <= 5e-4 and relative L2 <= 1e-4. cuDNN
and cuBLAS choose other algorithms than the CPU's MLAS (other summation orders, Winograd
or FFT convolutions), so results differ in the last bits per layer and the differences
grow over ~100 layers; the H200 measured 6.6e-5 (ppocr-det, probabilities in [0, 1]) and
1.4e-4 on values up to 73 (qwen-vl, relative L2 1.5e-6): the bounds leave about 7x.
fp16: the build's accuracy gate figure (``checks.accuracy`` of the variant, measured on
the GPU in the same run): the served answer must be within the gate's atol and cosine.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient

ROOT = Path(__file__).resolve().parent.parent
FP32_ATOL, FP32_REL_L2 = 5e-4, 1e-4
DB_THRESHOLD = 0.3  # PaddleOCR's DB binarisation threshold (the det post-processing)


def free_port() -> int:
    """A TCP port nobody listens on now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def det_page(batch: int = 1) -> np.ndarray:
    """A text page (scripts/demo_request.py's renderer, else stripes) as 1x3x640x640 FP32."""
    try:
        sys.path.insert(0, str(ROOT))
        from scripts.demo_request import det_input, render_text_image

        page = det_input(render_text_image(640, 640))
    except ImportError:  # no PIL on the host
        grid = np.indices((640, 640)).sum(axis=0) % 64 < 8
        page = np.broadcast_to(grid.astype(np.float32), (1, 3, 640, 640)).copy()
    rng = np.random.default_rng(7)
    pages = [page] + [
        np.clip(page + rng.normal(0, 0.2, page.shape), -3, 3) for _ in range(batch - 1)
    ]
    return np.concatenate(pages).astype(np.float32)


def requests_for(name: str) -> list[dict[str, np.ndarray]]:
    """The requests sent to model ``name``."""
    if name.startswith("ppocr-det"):
        return [{"x": det_page(1)}, {"x": det_page(3)}]
    rng = np.random.default_rng(11)
    return [
        {
            "pixel_values": rng.standard_normal((1024, 1176), dtype=np.float32),
            "grid_thw": np.array([[1, 32, 32]], np.int64),
        }
    ]


class Server:
    """``mmaas serve MODEL`` in a subprocess on free ports, its log in ``log``."""

    def __init__(self, model: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.grpc, self.metrics, self.http = free_port(), free_port(), free_port()
        self.log = log
        argv = [
            sys.executable,
            "-c",
            "from mmaas.cli import main; main()",
            "serve",
            str(model),
            "--host",
            "127.0.0.1",
            "--grpc-port",
            str(self.grpc),
            "--metrics-port",
            str(self.metrics),
            "--http-port",
            str(self.http),
        ]
        self.started = time.perf_counter()
        with log.open("w") as sink:
            self.proc = subprocess.Popen(
                argv, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
        self.client = grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc}")

    def wait_ready(self, timeout_s: float = 300.0) -> float:
        """Seconds until ServerReady; raises RuntimeError (with the log's tail) otherwise."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.tail()}")
            try:
                if self.client.is_server_ready():
                    return time.perf_counter() - self.started
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        raise RuntimeError(f"not ready after {timeout_s} s: {self.tail()}")

    def infer(
        self, model: str, arrays: dict[str, np.ndarray], outputs: list[str]
    ) -> dict[str, np.ndarray]:
        """One ModelInfer through tritonclient.grpc (raw binary contents)."""
        inputs = []
        for name, array in arrays.items():
            item = grpcclient.InferInput(
                name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT64"
            )
            item.set_data_from_numpy(array)
            inputs.append(item)
        result = self.client.infer(
            model, inputs, outputs=[grpcclient.InferRequestedOutput(o) for o in outputs]
        )
        return {name: result.as_numpy(name) for name in outputs}

    def metrics_text(self) -> str:
        """GET /metrics."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10) as r:
            return str(r.read().decode())

    def stop(self) -> int:
        """SIGTERM, then wait (kill after 30 s); the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def tail(self, lines: int = 15) -> str:
        """The end of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def compare(served: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """max/mean abs diff, relative L2, cosine (and the DB mask flips for probabilities)."""
    diff = np.abs(served.astype(np.float64) - reference)
    flat_s, flat_r = served.ravel().astype(np.float64), reference.ravel().astype(np.float64)
    figures = {
        "max_abs_diff": float(diff.max()),
        "mean_abs_diff": float(diff.mean()),
        "rel_l2": float(np.linalg.norm(flat_s - flat_r) / max(np.linalg.norm(flat_r), 1e-30)),
        "cosine": float(
            flat_s @ flat_r / max(np.linalg.norm(flat_s) * np.linalg.norm(flat_r), 1e-30)
        ),
        "reference_max_abs": float(np.abs(reference).max()),
    }
    if reference.min() >= 0 and reference.max() <= 1:
        figures["db_mask_flip_fraction"] = float(
            np.mean((served > DB_THRESHOLD) != (reference > DB_THRESHOLD))
        )
    return figures


def check_model(model_dir: Path, work: Path) -> dict[str, Any]:
    """Serve one model, answer its requests, compare, stop; the JSON record."""
    text = (model_dir / "model.yaml").read_text()
    name = next(
        line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("name:")
    )
    precision = next(
        line.split(":", 1)[1].split()[0]
        for line in text.splitlines()
        if line.startswith("target_precision:")
    )
    server = Server(model_dir, work / f"{model_dir.name}.log")
    record: dict[str, Any] = {"model": name, "folder": model_dir.name, "precision": precision}
    try:
        record["ready_s"] = round(server.wait_ready(), 2)
        manifest = json.loads((model_dir / ".mmaas/engine/manifest.json").read_text())
        record["gate"] = manifest["report"].get("accuracy")
        record["compile"] = manifest["report"].get("compile")
        onnx_file = model_dir / manifest["source"]["path"]
        reference = ort.InferenceSession(
            str(onnx_file.resolve()), providers=["CPUExecutionProvider"]
        )
        outputs = [o.name for o in reference.get_outputs()]
        record["requests"] = []
        for arrays in requests_for(name):
            answer = server.infer(name, arrays, outputs)
            expected = dict(zip(outputs, reference.run(outputs, arrays), strict=True))
            figures = {o: compare(answer[o], expected[o]) for o in outputs}
            record["requests"].append(
                {"shapes": {k: list(v.shape) for k, v in arrays.items()}, "outputs": figures}
            )
        metrics = server.metrics_text()
        record["nv_gpu_metrics"] = [
            line for line in metrics.splitlines() if line.startswith("nv_gpu_")
        ]
        record["passed"] = all(
            _within(precision, f, record["gate"])
            for r in record["requests"]
            for f in r["outputs"].values()
        )
        record["server_log"] = [
            line
            for line in server.tail(40).splitlines()
            if "placed nodes" in line or "CUDA graph" in line or "refused" in line
        ]
    except Exception as exc:  # recorded, and the next model still runs
        record["error"] = str(exc)
        record["passed"] = False
    finally:
        record["exit_code"] = server.stop()
    return record


def _within(precision: str, figures: dict[str, float], gate: dict[str, Any] | None) -> bool:
    if precision == "fp32":
        return figures["max_abs_diff"] <= FP32_ATOL and figures["rel_l2"] <= FP32_REL_L2
    outputs = (gate or {}).get("outputs", {})
    limits = next(iter(outputs.values()), {})
    atol, cosine = limits.get("atol"), limits.get("min_cosine")
    return (atol is None or figures["max_abs_diff"] <= atol) and (
        cosine is None or figures["cosine"] >= cosine
    )


def self_check(model_dir: Path, work: Path) -> None:
    """Before anything is measured: ``mmaas serve`` of ``model_dir`` becomes ready,
    answers one request and reports its instances on the GPU; else exit 1 with its log."""
    server = Server(model_dir, work / "self-check.log")
    try:
        ready = server.wait_ready()
        name = server.client.get_model_repository_index().models[0].name
        (group,) = server.client.get_model_config(name).config.instance_group
        arrays = requests_for(name)[0]
        answer = server.infer(
            name, arrays, [server.client.get_model_metadata(name).outputs[0].name]
        )
        print(f"self-check: mmaas serve {name} ready in {ready:.1f} s, instance group "
              f"{group.Kind.Name(group.kind)} gpus {list(group.gpus)}, answered "
              f"{[a.shape for a in answer.values()]}", flush=True)  # fmt: skip
        if group.Kind.Name(group.kind) != "KIND_GPU":
            raise RuntimeError("the instances do not run on the GPU")
    except Exception as exc:
        print(f"self-check FAILED: {exc}\n{server.tail(40)}", flush=True)
        server.stop()
        sys.exit(1)
    server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mmaas-gpu-serve"))
    parser.add_argument("--self-check", action="store_true", help="serve the first model only")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.self_check or args.out is None:
        self_check(args.models[0], args.work)
        return
    records = [check_model(model, args.work) for model in args.models]
    for r in records:
        worst = max(
            (f["max_abs_diff"] for q in r.get("requests", []) for f in q["outputs"].values()),
            default=float("nan"),
        )
        print(
            f"{r['folder']:<16} {r['precision']:<5} ready {r.get('ready_s', '-')} s  "
            f"max abs diff {worst:.3g}  passed {r['passed']}  {r.get('error', '')}"
        )
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    sys.exit(0 if all(r["passed"] for r in records) else 1)


if __name__ == "__main__":
    main()
