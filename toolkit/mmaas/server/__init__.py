"""The runtime server: KServe v2 over one engine (see :mod:`mmaas.server.app`).

Imports only the foundation (``mmaas.core``), the runtime part of its back end and its own
modules (import-linter contracts in pyproject.toml), so the runtime image installs a wheel
of just these and needs no pydantic, Jinja2, YAML loader, Docker client or tritonclient.
One protocol-neutral request path (:mod:`mmaas.server.dataplane`) sits behind the two
front ends (:mod:`mmaas.server.grpc`, :mod:`mmaas.server.http`), which share one protocol
layer (:mod:`mmaas.server.protocol`: request and response types, the tensor codec, shared
memory, model config messages) and import nothing of each other. Entry points:
``python -m mmaas.server`` and :func:`mmaas.server.app.serve`.
"""
