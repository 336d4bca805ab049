"""mmaas: turn an ONNX model plus a ``model.yaml`` into a hash-checked inference image.

One subpackage per pipeline step; data flows one way::

    model.yaml -> spec (ModelSpec) -> build (BuildRequest, BuildPlan, render, docker build:
    the builder stage runs ``python -m mmaas.stage``: compile -> hash -> manifest.json)
    -> labelled image -> server (reads manifest + engine, speaks KServe v2 gRPC)

``core`` is the foundation every step imports; ``backends`` holds each engine back end's
runtime, compiler and build-target parts; ``ci`` and ``cli`` sit on top.
"""

__version__ = "0.1.0"
