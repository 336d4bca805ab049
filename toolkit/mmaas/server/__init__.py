"""The runtime server: KServe v2 gRPC over one engine (see :mod:`mmaas.server.app`).

Imports only the foundation (errors, hashing, manifest, datatypes, samples, backends) and
its own modules, so the runtime image needs no pydantic, Jinja2, YAML loader or Docker
client. Entry points: ``python -m mmaas.server`` and :func:`mmaas.server.app.serve`.
"""
