#!/usr/bin/env bash
# Pack what scripts/gpu_run.sh needs on a GPU host that has Python 3.12 and no package index
# (no network): the mmaas wheel made from this checkout, the wheels of its
# runtime and CLI dependencies for cp312 manylinux, pytest, the repository's scripts, tests
# and pyproject.toml, and the two example models (ppocr-det and the qwen-vl vision export
# as exported, plus a copy whose graph CUDA graphs can capture: QWEN_FIXED, see below).
# Usage: bash scripts/gpu_carry.sh OUT_DIR [QWEN_FIXED_ONNX]
# On the host:  MMAAS_GPU_WHEELS=OUT_DIR/wheels MMAAS_GPU_QWEN=.../qwen2_vl_vision_graphfix.onnx \
#   MMAAS_GPU_QWEN_AS_EXPORTED=.../qwen2_vl_vision.onnx bash OUT_DIR/repo/scripts/gpu_run.sh OUT
# onnxruntime-gpu itself (256 MB) travels separately: scripts/gpu_ort_parts.sh makes its
# parts here, scripts/gpu_ort_env.sh joins them there (commands: docs/gpu.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: gpu_carry.sh OUT_DIR [QWEN_FIXED_ONNX]}
PY=${MMAAS_PYTHON:-$ROOT/.venv/bin/python}
WHEELS=(grpcio==1.85.3 grpcio-health-checking==1.85.1 grpcio-reflection==1.85.1
  protobuf==7.36.2 blake3==1.0.11 click==8.5.1 pydantic==2.14.4 pydantic_core==2.50.5
  annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0 Jinja2==3.1.6
  MarkupSafe==3.0.4 PyYAML==6.0.4 filelock==4.3.1 tritonclient==2.41.0
  onnxconverter-common==1.16.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4
  python-rapidjson==1.25 nvidia-ml-py==13.610.43 bcrypt==5.0.0)
rm -rf "$OUT" && mkdir -p "$OUT/wheels" "$OUT/repo/models"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d "$OUT/wheels" "${WHEELS[@]}"
"$PY" - "$OUT/wheels" <<'EOF'
import sys
from pathlib import Path
from mmaas.build.wheel import pack_wheel
packages = ["mmaas.core", "mmaas.spec", "mmaas.backends", "mmaas.build", "mmaas.stage",
            "mmaas.server", "mmaas.ci", "mmaas.bench", "mmaas.cli"]
print(pack_wheel(packages, Path(sys.argv[1])))
EOF
cp -r "$ROOT/scripts" "$ROOT/tests" "$ROOT/pyproject.toml" "$OUT/repo/"
find "$OUT/repo" -name __pycache__ -prune -exec rm -rf {} +
for model in ppocr-det qwen-vl; do
  mkdir -p "$OUT/repo/models/$model"
  onnx=$(sed -nE 's/^\s*path:\s*(\S+).*/\1/p' "$ROOT/models/$model/model.yaml" | head -n 1)
  cp "$ROOT/models/$model/model.yaml" "$ROOT/models/$model/$onnx" "$OUT/repo/models/$model/"
done
if [[ -n ${2:-} ]]; then cp "$2" "$OUT/repo/models/qwen-vl/qwen2_vl_vision_graphfix.onnx"; fi
du -sh "$OUT"
