"""The TensorRT (NVIDIA GPU) back end, in three parts: ``host`` (the build target: checks,
plan values, the GPU route of ``mmaas build``, doctor; imports the spec), ``builder`` (the
builder stage's compiler: trtexec argv, shapes, log and profile check, timing cache,
precision conversion, latency probe, and the typed engine settings) and ``runtime`` (what
the image loads: engine, bindings, host compatibility, GPU facts, the release table and
the per-stage preflight)."""
