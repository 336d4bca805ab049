"""The ONNX Runtime back end (CPU, or a GPU through its CUDA or TensorRT provider), in three
parts: ``host`` (the build target: checks, recipe, settings, doctor; imports the spec),
``builder`` (the builder stage's compiler and fp16 conversion) and ``runtime`` (what the
image loads: CPU and GPU sessions, providers, CUDA graphs, placement; and the typed engine
settings that host, builder and runtime share)."""
