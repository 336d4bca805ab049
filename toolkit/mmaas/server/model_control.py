"""Triton's model repository extension (``docs/protocol/extension_model_repository.md``),
protocol-neutral: the index of the served models with their states, and load / unload as
Triton's explicit model control mode does them (gRPC ``RepositoryIndex`` /
``RepositoryModelLoad`` / ``RepositoryModelUnload``; HTTP ``/v2/repository/...``).

The models are the image's, verified at build and at start: unload closes a model's
executor and frees its engines (requests get UNAVAILABLE, the index says UNAVAILABLE /
``unloaded``, health NOT_SERVING); load re-verifies, reloads and warms it up (also when it
is loaded: Triton reloads). Load parameters that would swap its configuration or files
(``config``, ``file:<path>``) are refused: a rebuilt image is how a model changes here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from mmaas.server.repository import Executor, Repository, ServedModel
from mmaas.server.status import InvalidArgument, Unavailable, Unsupported

Reload = Callable[[ServedModel], Awaitable[Executor]]
STATES = {"loading": "LOADING", "ready": "READY", "unloading": "UNLOADING"}
REASONS = {"unloaded": "unloaded", "draining": "the server is shutting down (SIGTERM)"}


@dataclass(frozen=True)
class IndexEntry:
    """One model of the index (Triton's ``RepositoryIndexResponse.ModelIndex``): state
    ``READY``, ``LOADING``, ``UNLOADING`` or ``UNAVAILABLE`` with its reason."""

    name: str
    version: str
    state: str
    reason: str


class ModelControl:
    """Index, load and unload over ``repository``; ``reload`` verifies, loads and warms up
    a model's engines and returns its started executor (None: loading is refused);
    ``changed`` is awaited after every load or unload (the server updates its health)."""

    def __init__(
        self,
        repository: Repository,
        reload: Reload | None,
        changed: Callable[[], Awaitable[None]],
    ) -> None:
        self.repository = repository
        self.reload = reload
        self.changed = changed
        self.lock = asyncio.Lock()

    def index(self, ready_only: bool = False) -> list[IndexEntry]:
        """Every model (only the ready ones when ``ready_only``), repository order."""
        entries = [
            IndexEntry(
                model.name,
                model.version,
                STATES.get(model.state, "UNAVAILABLE"),
                REASONS.get(model.state, ""),
            )
            for model in self.repository
        ]
        return [e for e in entries if e.state == "READY"] if ready_only else entries

    async def load(self, name: str, parameters: Mapping[str, object]) -> None:
        """(Re)load model ``name``: verify, load and warm up its engines, then READY.

        Raises:
            NotFound: not a model of this server. Unsupported: ``config`` / ``file:``
                parameters. InvalidArgument: another parameter. Unavailable: draining.
        """
        for key in parameters:
            if key == "config" or key.startswith("file:"):
                raise Unsupported(
                    f"load parameter {key!r} is not supported: mmaas serves the engine "
                    "verified into its image; change model.yaml and rebuild the image"
                )
            raise InvalidArgument(f"unknown load parameter {key!r} (Triton's: config, file:)")
        model = self.repository.get(name)
        if self.reload is None:
            raise Unsupported(f"model {name!r} cannot be reloaded by this server")
        async with self.lock:
            self._refuse_when_draining(model)
            await self._close(model)
            model.state = "loading"
            try:
                model.executor = await self.reload(model)
                model.state = "ready"
            except BaseException:
                model.state = "unloaded"
                raise
            finally:
                await self.changed()

    async def unload(self, name: str, parameters: Mapping[str, object]) -> None:
        """Unload model ``name`` (in-flight requests finish first).

        Raises:
            NotFound: not a model of this server. InvalidArgument: a parameter other than
                ``unload_dependents`` (bool). Unavailable: draining.
        """
        for key, value in parameters.items():
            if key != "unload_dependents" or not isinstance(value, bool):
                raise InvalidArgument(
                    f"unknown unload parameter {key!r} = {value!r} "
                    "(Triton's: unload_dependents, a boolean)"
                )
        model = self.repository.get(name)
        async with self.lock:
            self._refuse_when_draining(model)
            await self._close(model)
            model.state = "unloaded"
            await self.changed()

    async def _close(self, model: ServedModel) -> None:
        executor, model.executor = model.executor, None
        if executor is not None:
            model.state = "unloading"
            await executor.close()

    @staticmethod
    def _refuse_when_draining(model: ServedModel) -> None:
        if model.state == "draining":
            raise Unavailable("the server is shutting down (SIGTERM); no load or unload now")
