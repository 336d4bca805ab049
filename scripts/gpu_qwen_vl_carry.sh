#!/usr/bin/env bash
# Pack what scripts/gpu_qwen_vl.sh needs on a GPU host without a package index (no network):
# the code of this checkout (toolkit, scripts, benchmarks, the qwen2-vl GPU tests and their
# helpers, models/qwen-vl/pictures) and one archive of the cp312 manylinux wheels it imports
# that such a host lacks (the server's gRPC and HTTP stack, pydantic, blake3, tritonclient
# without its perf_analyzer binaries, transformers 5.24, tokenizers 0.23, bcrypt for the test
# fixtures), 20 MB of xz.
# onnxruntime-gpu travels in parts (scripts/gpu_ort_parts.sh). On the host:
#   . OUT/repo/scripts/gpu_qwen_vl_env.sh PARTS OUT/site.tar.xz
#   bash OUT/repo/scripts/gpu_qwen_vl.sh /tmp/qwen-work $OUT_FOLDER all
# Usage: bash scripts/gpu_qwen_vl_carry.sh OUT_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: gpu_qwen_vl_carry.sh OUT_DIR}
PY=${MMAAS_PYTHON:-$ROOT/.venv/bin/python}
WHEELS=(grpcio==1.85.3 grpcio-health-checking==1.85.1 grpcio-reflection==1.85.1
  protobuf==7.36.2 blake3==1.0.11 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
  typing-inspection==0.4.5 typing_extensions==4.16.0 tritonclient==2.41.0 python-rapidjson==1.25
  onnxconverter-common==1.16.0 transformers==5.24.0 tokenizers==0.23.3 granian==2.8.9
  starlette==1.10.0 orjson==3.13.0 bcrypt==5.0.0)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" -d "$WORK/wheels" "${WHEELS[@]}"
"$PY" -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" --target "$WORK/site" "$WORK"/wheels/*.whl
rm -rf "$WORK/site/bin" "$WORK/site/tritonclient-"*.data
mkdir -p "$WORK/site/mmaas-0.1.0.dist-info"  # importlib.metadata finds the PYTHONPATH'd mmaas
printf 'Metadata-Version: 2.1\nName: mmaas\nVersion: 0.1.0\n' >"$WORK/site/mmaas-0.1.0.dist-info/METADATA"
rm -rf "$OUT" && mkdir -p "$OUT/repo/tests/pipelines" "$OUT/repo/models/qwen-vl"
tar -C "$WORK/site" -cf - . | xz -T0 -9 >"$OUT/site.tar.xz"
cp -r "$ROOT/toolkit" "$ROOT/scripts" "$ROOT/benchmarks" "$ROOT/pyproject.toml" "$OUT/repo/"
cp "$ROOT"/tests/paths.py "$ROOT"/tests/conftest.py "$ROOT"/tests/*.py "$OUT/repo/tests/" 2>/dev/null || true
cp "$ROOT/tests/pipelines/__init__.py" "$OUT/repo/tests/pipelines/"
cp -r "$ROOT/tests/pipelines/qwen2_vl" "$OUT/repo/tests/pipelines/"
cp -r "$ROOT/models/qwen-vl/pictures" "$OUT/repo/models/qwen-vl/" 2>/dev/null || true
find "$OUT/repo" \( -name __pycache__ -o -name .mmaas \) -prune -exec rm -rf {} +
du -sh "$OUT" "$OUT/site.tar.xz"
