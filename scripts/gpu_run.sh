#!/usr/bin/env bash
# The GPU run, repeatable on any host with an NVIDIA GPU (measured on an H200):
#   check  GPU variants of ppocr-det and the qwen-vl vision engine (scripts/gpu_models.py),
#          `mmaas validate` of one, and the self-check: `mmaas serve` of it becomes ready,
#          answers and reports KIND_GPU (scripts/gpu_serve_check.py --self-check); if
#          that fails nothing else runs;
#   tests  the gpu-marked tests (tests/backends/onnxruntime/runtime/test_gpu*.py: engines,
#          the real server with tritonclient, CUDA shared memory, perf_analyzer, doctor);
#   serve  mmaas serve of each variant answered by tritonclient, compared with ONNX Runtime
#          CPU (scripts/gpu_serve_check.py);
#   bench  scripts/bench_gpu.py: raw ONNX Runtime, the shape-change probe, mmaas under
#          perf_analyzer (system and CUDA shared memory, batching with and without graphs).
# Usage: bash scripts/gpu_run.sh OUT_DIR [check|tests|serve|bench|all]...
# `check` runs first whenever another step is asked for.
# Environment:
#   MMAAS_GPU_PYTHON   the interpreter (default python3)
#   MMAAS_GPU_CARRY    a folder holding scripts/gpu_carry.py's bundle (site.tar.xz,
#                      repo.tar.xz, ort.tar.xz, SHA256SUMS), for a host without a package
#                      index: checked and unpacked into MMAAS_GPU_WORK once, then first on
#                      PYTHONPATH (onnxruntime-gpu, then the resolved dependencies and mmaas)
#   MMAAS_GPU_WORK     scratch folder (default /tmp/mmaas-gpu-run)
#   MMAAS_GPU_BENCH_S  seconds per perf_analyzer window (default 2)
#   MMAAS_GPU_STEP_S   time limit of each step in seconds (default 400)
#   MMAAS_PERF_ANALYZER  perf_analyzer (default: the carried one, else on PATH)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: gpu_run.sh OUT_DIR [check|tests|serve|bench|all]...}
shift
STEPS=("${@:-all}")
PY=${MMAAS_GPU_PYTHON:-python3}
WORK=${MMAAS_GPU_WORK:-/tmp/mmaas-gpu-run}
LIMIT=${MMAAS_GPU_STEP_S:-400}
mkdir -p "$OUT" "$WORK"
say() { printf 'gpu_run: %s\n' "$*"; }
wants() { local s; for s in "${STEPS[@]}"; do [[ $s == "$1" || $s == all ]] && return 0; done; return 1; }

# shellcheck source=/dev/null
. "$ROOT/scripts/gpu_env.sh"
export PYTHONUNBUFFERED=1 MMAAS_PERF_ANALYZER=${MMAAS_PERF_ANALYZER:-perf_analyzer}
cd "$ROOT"
"$PY" -c 'import onnxruntime as o, mmaas; print("gpu_run: onnxruntime", o.__version__, o.get_available_providers(), "mmaas", mmaas.__file__)'
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv,noheader || true

say "check: models, validate, mmaas serve self-check"
"$PY" scripts/gpu_models.py "$WORK/fp32"
"$PY" -m mmaas validate "$WORK/fp32/ppocr-det"
timeout "$LIMIT" "$PY" scripts/gpu_serve_check.py "$WORK/fp32/ppocr-det" --self-check \
  --work "$WORK/serve"
status=0
if wants tests; then
  say "gpu tests"
  timeout "$LIMIT" "$PY" -m pytest -p no:cacheprovider -m gpu -q -rA --timeout 300 \
    tests/backends/onnxruntime/runtime/test_gpu.py \
    tests/backends/onnxruntime/runtime/test_gpu_serving.py \
    --junitxml "$OUT/gpu-tests.xml" >"$OUT/gpu-tests.log" 2>&1 || status=1
  tail -n 25 "$OUT/gpu-tests.log"
fi
if wants serve; then
  say "serve and answer"
  timeout "$LIMIT" "$PY" scripts/gpu_serve_check.py "$WORK/fp32/ppocr-det" \
    "$WORK/fp32/qwen-vl" --out "$OUT/gpu-serve-check.json" --work "$WORK/serve" || status=1
fi
if wants bench; then
  say "benchmark"
  timeout "$LIMIT" "$PY" scripts/bench_gpu.py "$WORK/fp32" --out "$OUT/gpu-bench.json" \
    --window-ms "$((${MMAAS_GPU_BENCH_S:-2} * 1000))" || status=1
fi
tar -C "$WORK" -czf "$OUT/logs.tgz" --ignore-failed-read serve 2>/dev/null || true
exit $status
