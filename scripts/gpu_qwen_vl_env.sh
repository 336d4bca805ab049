# shellcheck shell=bash
# Source on the GPU host: . scripts/gpu_qwen_vl_env.sh PARTS_FOLDER SITE_ARCHIVE
# onnxruntime-gpu from the parts scripts/gpu_ort_parts.sh made (scripts/gpu_ort_env.sh), the
# wheels scripts/gpu_qwen_vl_carry.sh packed (SITE_ARCHIVE, unpacked once into /tmp/qwensite),
# and the CUDA/cuDNN libraries of the host's python on the loader's path.
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/gpu_ort_env.sh" "${1:?usage: . gpu_qwen_vl_env.sh PARTS SITE}" || return
if [[ ! -f /tmp/qwensite/.unpacked ]]; then
  mkdir -p /tmp/qwensite && xz -dc -T0 "${2:?usage: . gpu_qwen_vl_env.sh PARTS SITE}" \
    | tar -C /tmp/qwensite -xf - && touch /tmp/qwensite/.unpacked
fi
export PYTHONPATH=/tmp/qwensite:$PYTHONPATH
for _lib in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))'); do
  for _dir in "$_lib"/nvidia/*/lib; do
    [[ -d $_dir ]] && LD_LIBRARY_PATH=$_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
done
export LD_LIBRARY_PATH
unset _lib _dir
