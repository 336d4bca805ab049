"""The runtime server: KServe v2 over one engine (see :mod:`mmaas.server.app`).

Imports only the foundation (``mmaas.core``), the runtime part of its back end and its own
modules (import-linter contracts in pyproject.toml), so the runtime image installs a wheel
of just these and needs no pydantic, Jinja2, YAML loader, Docker client or tritonclient.
One protocol-neutral request path (:mod:`mmaas.server.inference`) sits behind the front
ends (:mod:`mmaas.server.grpc`). Entry points: ``python -m mmaas.server`` and
:func:`mmaas.server.app.serve`.
"""
