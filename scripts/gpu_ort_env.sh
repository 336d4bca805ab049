# shellcheck shell=bash
# Source on the GPU host: . scripts/gpu_ort_env.sh PARTS_FOLDER [SITE]
# PARTS_FOLDER holds every part scripts/gpu_ort_parts.sh made (ort.tar.xz.part0, 1, ...)
# and ort.tar.xz.sha256. Joins them, checks the sha256, unpacks the onnxruntime-gpu tree
# into SITE (default /tmp/ortsite; the tree `pip install --no-deps --target` gives) once, and
# puts SITE first on PYTHONPATH. The CUDA/cuDNN libraries come from the host's python
# (scripts/gpu_run.sh adds its nvidia/*/lib folders to LD_LIBRARY_PATH).
# Returns non-zero (the shell stays) when a part is missing or the checksum differs.
_ort_parts=${1:?usage: . scripts/gpu_ort_env.sh PARTS_FOLDER [SITE]}
_ort_site=${2:-/tmp/ortsite}
if [[ ! -f $_ort_site/onnxruntime/__init__.py ]]; then
  cat "$_ort_parts"/ort.tar.xz.part* >"$_ort_parts/ort.tar.xz" || return 2
  (cd "$_ort_parts" && sha256sum -c ort.tar.xz.sha256) || return 3
  rm -rf "$_ort_site" && mkdir -p "$_ort_site"
  xz -dc -T0 "$_ort_parts/ort.tar.xz" | tar -C "$_ort_site" -xf - || return 4
  rm -f "$_ort_parts/ort.tar.xz"
fi
export PYTHONPATH=$_ort_site${PYTHONPATH:+:$PYTHONPATH}
unset _ort_parts _ort_site
