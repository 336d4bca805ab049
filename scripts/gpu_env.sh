# shellcheck shell=bash
# Source on a GPU host (scripts/gpu_run.sh and scripts/gpu_qwen_vl.sh do), with ROOT (the
# repository), PY (the interpreter) and WORK (scratch) set: with MMAAS_GPU_CARRY (a folder
# holding scripts/gpu_carry.py's bundle: site.tar.xz, repo.tar.xz, ort.tar.xz, SHA256SUMS)
# the bundle is checked and unpacked into WORK once (onnxruntime-gpu, the resolved
# dependencies, the mmaas wheel) and put first on PYTHONPATH, with the carried
# perf_analyzer; then the CUDA/cuDNN wheels' libraries of PY go on LD_LIBRARY_PATH
# (libonnxruntime_providers_cuda.so has no RPATH).
if [[ -n ${MMAAS_GPU_CARRY:-} ]]; then
  if [[ ! -f $WORK/.unpacked ]]; then
    (cd "$MMAAS_GPU_CARRY" && sha256sum --quiet -c SHA256SUMS)
    rm -rf "$WORK/site" "$WORK/ort" && mkdir -p "$WORK/site" "$WORK/ort"
    xz -dc -T0 "$MMAAS_GPU_CARRY/ort.tar.xz" | tar -C "$WORK/ort" -xf -
    xz -dc -T0 "$MMAAS_GPU_CARRY/site.tar.xz" | tar -C "$WORK/site" -xf -
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" \
      "$ROOT"/wheels/mmaas-*.whl
    touch "$WORK/.unpacked"
  fi
  export PYTHONPATH=$WORK/ort:$WORK/site${PYTHONPATH:+:$PYTHONPATH}
  if [[ -x $WORK/site/bin/perf_analyzer && -z ${MMAAS_PERF_ANALYZER:-} ]]; then
    cat >"$WORK/perf_analyzer" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$WORK/site/nvidia/cuda_runtime/lib:$ROOT/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$WORK/site/bin/perf_analyzer" "\$@"
EOF
    chmod +x "$WORK/perf_analyzer"
    export MMAAS_PERF_ANALYZER=$WORK/perf_analyzer
  fi
fi
# The CUDA/cuDNN wheels' libraries: libonnxruntime_providers_cuda.so has no RPATH.
for lib in $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))'); do
  for dir in "$lib"/nvidia/*/lib; do
    [[ -d $dir ]] && LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
done
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
