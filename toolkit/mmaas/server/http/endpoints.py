"""The KServe v2 REST endpoints other than inference: health, server and model metadata,
model config, statistics, readiness and the repository index. Documents are the protocol
layer's messages (:mod:`mmaas.server.protocol.messages`, the ones gRPC answers) printed by
:mod:`.protojson`, so both front ends report the same facts.

Health answers ``{"live": true}`` / ``{"ready": true}`` (the KServe SDK's REST client reads
the body; Triton's clients read only the status) and 503 ``{"ready": false}`` while the
model loads or the server drains (Triton answers 400; Kubernetes ``httpGet`` probes and
load balancers treat 503 as "not ready", as KServe's own server does).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mmaas.server.dataplane import DataPlane
from mmaas.server.http.errors import answer, json_response
from mmaas.server.http.protojson import to_json
from mmaas.server.protocol import messages
from mmaas.server.repository import ServedModel

CACHE_STATS = ("cache_hit", "cache_miss")


class Endpoints:
    """The endpoints over the data plane; each takes a Starlette request."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self.repository = plane.repository

    async def live(self, request: Request) -> Response:
        """``GET /v2/health/live``: live as soon as the process answers."""
        return json_response({"live": True})

    async def ready(self, request: Request) -> Response:
        """``GET /v2/health/ready``: 200 once the model is loaded and warmed up, else 503."""
        ready = self.repository.ready
        return json_response({"ready": ready}, 200 if ready else 503)

    async def server_metadata(self, request: Request) -> Response:
        """``GET /v2``: KServe v2 ``$metadata_server_response``."""
        return json_response(to_json(messages.to_server_metadata()))

    async def model_ready(self, request: Request) -> Response:
        """``GET /v2/models/{m}[/versions/{v}]/ready``: 200, 503 not ready, 404 unknown."""
        return await answer(self._model_ready, request)

    async def metadata(self, request: Request) -> Response:
        """``GET /v2/models/{m}[/versions/{v}]``: ``$metadata_model_response``."""
        return await answer(self._metadata, request)

    async def config(self, request: Request) -> Response:
        """``GET /v2/models/{m}[/versions/{v}]/config``: Triton's ModelConfig as JSON."""
        return await answer(self._config, request)

    async def statistics(self, request: Request) -> Response:
        """``GET /v2/models[/{m}[/versions/{v}]]/stats``: Triton's statistics extension."""
        return await answer(self._statistics, request)

    async def _model_ready(self, request: Request) -> Response:
        model = self._lookup(request)
        ready = model.ready
        return json_response({"name": model.name, "ready": ready}, 200 if ready else 503)

    async def _metadata(self, request: Request) -> Response:
        model = self._lookup(request)
        return json_response(to_json(messages.to_metadata(model)))

    async def _config(self, request: Request) -> Response:
        model = self._lookup(request)
        return json_response(to_json(messages.to_model_config(model)))

    async def _statistics(self, request: Request) -> Response:
        if "model" in request.path_params:
            models = [self._lookup(request)]
        else:
            models = list(self.repository)
        message = messages.to_statistics(models)
        for stats in message.model_stats:
            for name in CACHE_STATS:  # perf_analyzer reads them: always present
                getattr(stats.inference_stats, name).SetInParent()
        return json_response(to_json(message))

    def _lookup(self, request: Request) -> ServedModel:
        params = request.path_params
        return self.plane.lookup(params["model"], params.get("version", ""))
