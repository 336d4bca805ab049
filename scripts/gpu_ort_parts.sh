#!/usr/bin/env bash
# onnxruntime-gpu for a GPU host without a package index whose file transfers are capped
# (a GPU host reached in pieces of at most 64 MiB per call). Here, once: downloads the pinned
# onnxruntime-gpu wheel (templates/image-constraints.txt; cp312 manylinux_2_28, 256 MB),
# unpacks it, packs the tree as tar.xz (195 MiB: one part fewer than the wheel needs) and
# splits it into 58 MiB parts, one per folder (PARTS/p0, p1, ...: one folder per call);
# PARTS/p0 also holds the archive's sha256. On the host, after every part was copied into
# one folder: `. scripts/gpu_ort_env.sh FOLDER` checks, unpacks and exports PYTHONPATH.
# Usage: bash scripts/gpu_ort_parts.sh PARTS_DIR [WHEEL]   (WHEEL: an already downloaded one)
# Takes about 2.5 min on 2 cores (xz -6).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: gpu_ort_parts.sh PARTS_DIR [WHEEL]}
PY=${MMAAS_PYTHON:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
WHEEL=${2:-}
if [[ -z $WHEEL ]]; then
  pin=$(grep -E '^onnxruntime-gpu==' "$ROOT/templates/image-constraints.txt")
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$WORK/wheel" "$pin"
  WHEEL=$(ls "$WORK"/wheel/*.whl)
fi
mkdir -p "$WORK/tree"
"$PY" -m zipfile -e "$WHEEL" "$WORK/tree"
tar -C "$WORK/tree" -cf - . | xz -T0 -6 >"$WORK/ort.tar.xz"
rm -rf "$OUT" && mkdir -p "$OUT"
split -b 58M -d -a 1 "$WORK/ort.tar.xz" "$WORK/ort.tar.xz.part"
parts=0
for part in "$WORK"/ort.tar.xz.part*; do
  mkdir -p "$OUT/p${part##*part}" && mv "$part" "$OUT/p${part##*part}/"
  parts=$((parts + 1))
done
(cd "$WORK" && sha256sum ort.tar.xz) >"$OUT/p0/ort.tar.xz.sha256"
echo "gpu_ort_parts: $(basename "$WHEEL") -> $parts parts in $OUT," \
  "sha256 $(cut -d' ' -f1 "$OUT/p0/ort.tar.xz.sha256")"
