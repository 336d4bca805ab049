#!/usr/bin/env bash
# The GPU run, repeatable on any host with an NVIDIA GPU (measured on an H200):
#   1. GPU variants of ppocr-det and qwen-vl (scripts/gpu_models.py): fp32 with CUDA graphs,
#      and fp16 with the accuracy gate;
#   2. the gpu-marked tests (tests/backends/onnxruntime/runtime/test_gpu.py) against the real GPU;
#   3. mmaas serve of each model on the GPU, answered by tritonclient from this host and
#      compared with ONNX Runtime CPU (scripts/gpu_serve_check.py);
#   4. the benchmark (scripts/bench_gpu.py): raw ONNX Runtime CUDA vs mmaas over gRPC.
# Usage: bash scripts/gpu_run.sh OUT_DIR [prepare|tests|serve|bench|all]...
# Needs: python3 with mmaas (pip install '.[cli,fp16,gpu]' or the wheels below),
# onnxruntime-gpu and the CUDA 13 / cuDNN 9 wheels (or a CUDA install on the loader's path),
# pytest, and the models (scripts/fetch_models.py, mmaas convert qwen2-vl).
# Environment:
#   MMAAS_GPU_PYTHON   the interpreter (default python3)
#   MMAAS_GPU_WHEELS   a folder of wheels installed offline (--no-index --no-deps) into
#                      MMAAS_GPU_SITE (default /tmp/mmaas-gpu-site) first: for a host
#                      without an index
#   MMAAS_GPU_QWEN     the qwen-vl vision export to serve (default models/qwen-vl's)
#   MMAAS_GPU_QWEN_AS_EXPORTED  an export whose graph capture ONNX Runtime refuses, for
#                      the test that the refusal names the nodes (optional)
#   MMAAS_GPU_WORK     scratch folder (default /tmp/mmaas-gpu-run)
#   MMAAS_GPU_BENCH_S  seconds per concurrency level of the benchmark (default 5)
#   MMAAS_GPU_BENCH_ONLY  the models it measures (default "ppocr-det qwen-vl")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: gpu_run.sh OUT_DIR [prepare|tests|serve|bench|all]...}
shift
STEPS=("${@:-all}")
PY=${MMAAS_GPU_PYTHON:-python3}
WORK=${MMAAS_GPU_WORK:-/tmp/mmaas-gpu-run}
mkdir -p "$OUT" "$WORK"
say() { printf 'gpu_run: %s\n' "$*"; }
wants() { local s; for s in "${STEPS[@]}"; do [[ $s == "$1" || $s == all ]] && return 0; done; return 1; }

if [[ -n ${MMAAS_GPU_WHEELS:-} ]]; then
  SITE=${MMAAS_GPU_SITE:-/tmp/mmaas-gpu-site}
  if [[ ! -f $SITE/.installed ]]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$MMAAS_GPU_WHEELS"/*.whl
    touch "$SITE/.installed"
  fi
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
# The CUDA/cuDNN wheels' libraries: libonnxruntime_providers_cuda.so has no RPATH.
for lib in $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))'); do
  for dir in "$lib"/nvidia/*/lib; do
    [[ -d $dir ]] && LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
cd "$ROOT"
"$PY" -c 'import onnxruntime as o, mmaas; print("gpu_run: onnxruntime", o.__version__, o.get_available_providers(), "mmaas", mmaas.__file__)'
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv,noheader || true

QWEN=${MMAAS_GPU_QWEN:-$ROOT/models/qwen-vl/qwen2_vl_vision.onnx}
if wants prepare || wants tests || wants serve || wants bench; then
  "$PY" scripts/gpu_models.py "$WORK/fp32" --qwen-onnx "$QWEN"
  "$PY" scripts/gpu_models.py "$WORK/fp16" --precision fp16 --qwen-onnx "$QWEN"
fi
status=0
if wants tests; then
  say "gpu tests"
  MMAAS_GPU_QWEN=$QWEN "$PY" -m pytest -p no:cacheprovider -m gpu -q -rA \
    tests/backends/onnxruntime/runtime/test_gpu.py --junitxml "$OUT/gpu-tests.xml" 2>&1 \
    | tee "$OUT/gpu-tests.log" || status=1
fi
if wants serve; then
  say "serve and answer"
  "$PY" scripts/gpu_serve_check.py "$WORK/fp32/ppocr-det" "$WORK/fp32/qwen-vl" \
    "$WORK/fp16/ppocr-det" "$WORK/fp16/qwen-vl" --out "$OUT/gpu-serve-check.json" \
    --work "$WORK/serve" || status=1
fi
if wants bench; then
  say "benchmark"
  [[ -f $WORK/fp32/ppocr-det/.mmaas/engine/manifest.json ]] || "$PY" scripts/gpu_serve_check.py \
    "$WORK/fp32/ppocr-det" "$WORK/fp32/qwen-vl" --out "$WORK/compile.json" --work "$WORK/serve"
  # shellcheck disable=SC2086 # the model names are words
  "$PY" scripts/bench_gpu.py "$WORK/fp32" --out "$OUT/gpu-bench.json" \
    --duration "${MMAAS_GPU_BENCH_S:-5}" --only ${MMAAS_GPU_BENCH_ONLY:-ppocr-det qwen-vl} \
    || status=1
fi
exit $status
