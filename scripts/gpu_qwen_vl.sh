#!/usr/bin/env bash
# The qwen2-vl GPU run, repeatable on any host with an NVIDIA GPU (measured on an H200):
#   checks   the language engine's in-place KV cache on the GPU against the CPU in every mode,
#            CUDA-graph capture and replay of decode batches, node placement
#            (scripts/gpu_qwen_vl_checks.py)
#   convert  the seeded Qwen2-VL-2B checkpoint and its bf16 GPU engines (mmaas convert
#            qwen2-vl --config 2b --device gpu), and the small GPU variant (fp16)
#   bench    benchmarks/bench_qwen_vl_gpu.py on the 2B model: mmaas served vs transformers
#   tests    the gpu-marked tests: the real mmaas serve of the small GPU variant, tritonclient
# The 2B engines are bf16 when the checks passed in bf16 with no host copies, else fp16
# (MMAAS_GPU_QWEN_PRECISION forces one).
# Usage: bash scripts/gpu_qwen_vl.sh WORK OUT [checks|convert|tests|bench|all]...
# WORK holds the converted models (kept between calls while the host stays up); OUT gets the
# logs and JSON. Needs python3 with torch, transformers 5.24 and onnxruntime-gpu importable,
# or MMAAS_GPU_CARRY: scripts/gpu_carry.py's bundle, unpacked into WORK (scripts/gpu_env.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${1:?usage: gpu_qwen_vl.sh WORK OUT [checks|convert|tests|bench|all]...}
OUT=${2:?usage: gpu_qwen_vl.sh WORK OUT [checks|convert|tests|bench|all]...}
shift 2
STEPS=("${@:-all}")
PY=${MMAAS_GPU_PYTHON:-python3}
mkdir -p "$WORK" "$OUT"
# shellcheck source=/dev/null
. "$ROOT/scripts/gpu_env.sh"
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT/toolkit:$ROOT${PYTHONPATH:+:$PYTHONPATH}
say() { printf 'gpu_qwen_vl %(%H:%M:%S)T: %s\n' -1 "$*"; }
wants() { local s; for s in "${STEPS[@]}"; do [[ $s == "$1" || $s == all ]] && return 0; done; return 1; }
cd "$ROOT" || exit 1
status=0
if wants checks; then
  say "checks"
  "$PY" scripts/gpu_qwen_vl_checks.py --out "$OUT/checks.json" --layers 2 2>&1 \
    | grep -v "Loading weights" | tee "$OUT/checks.log" || status=1
fi
PRECISION=${MMAAS_GPU_QWEN_PRECISION:-}
if [[ -z $PRECISION && -f $OUT/checks.json ]]; then  # bf16 if its checks passed with no copies
  PRECISION=$("$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
ok = lambda p: r.get(p, {}).get("ok") and not r[p]["placement"].get("memcpy")
print("bf16" if ok("bf16") else "fp16" if ok("fp16") else "bf16")' "$OUT/checks.json" || echo bf16)
fi
PRECISION=${PRECISION:-bf16}
if wants convert; then
  say "convert 2b ($PRECISION) and the small GPU variant (fp16)"
  mkdir -p "$WORK/qwen-small"
  [[ -d models/qwen-vl/pictures ]] && cp -r models/qwen-vl/pictures "$WORK/qwen-small/"
  "$PY" -m mmaas convert qwen2-vl "$WORK/qwen-small" --device gpu --precision fp16 \
    --skip-validation >"$OUT/convert-small.log" 2>&1 || { status=1; tail -5 "$OUT/convert-small.log"; }
  "$PY" -m mmaas convert qwen2-vl "$WORK/qwen-2b" --config 2b --device gpu --precision "$PRECISION" \
    --skip-validation 2>&1 | grep -v "Loading weights\|torchvision\|Writing model" \
    | tee "$OUT/convert-2b.log" || status=1
fi
if wants bench; then
  say "benchmark (2b)"
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  "$PY" benchmarks/bench_qwen_vl_gpu.py "$WORK/qwen-2b" --out "$OUT/qwen-vl-2b-h200-$stamp.json" \
    2>&1 | grep -v "Loading weights" | tee "$OUT/bench.log" || status=1
  cp "$WORK/qwen-2b/serve.log" "$OUT/serve-2b.log" 2>/dev/null || true
fi
if wants tests; then
  say "gpu tests (mmaas serve of the small GPU variant)"
  MMAAS_GPU_QWEN_MODEL=$WORK/qwen-small "$PY" -m pytest -p no:cacheprovider -m gpu -q -rA \
    tests/pipelines/qwen2_vl/gpu --junitxml "$OUT/gpu-tests.xml" >"$OUT/gpu-tests.log" 2>&1 || status=1
  tail -15 "$OUT/gpu-tests.log"
fi
say "done (status $status)"
exit $status
