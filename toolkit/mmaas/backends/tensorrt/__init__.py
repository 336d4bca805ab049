"""The TensorRT (NVIDIA GPU) back end: runtime part (runtime, engine, compat), compiler part
(compiler, trtexec/, timing_cache, precision, latency, preflight), typed engine settings
(settings), the release table (releases), GPU facts (gpu) and the host side (target,
image, gpu_route)."""
