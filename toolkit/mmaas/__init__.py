"""mmaas: turn an ONNX model plus a ``model.yaml`` into a hash-checked inference image.

Data flows one way::

    model.yaml -> ModelSpec -> BuildPlan -> docker build (builder stage runs
    ``python -m mmaas.stage``: compile -> hash -> manifest.json) -> labelled image
    -> runtime server (reads manifest + engine, speaks KServe v2 gRPC)
"""

__version__ = "0.1.0"
