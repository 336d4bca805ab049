"""What every front end serves, one of each per server and shared by the gRPC and HTTP
front ends: the model repository and the one request path over it (the data plane), the
shared memory registries (system and CUDA regions), the model control (repository
extension) and the log settings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mmaas.server.dataplane import DataPlane
from mmaas.server.log_settings import LogSettings
from mmaas.server.model_control import ModelControl, Reload
from mmaas.server.protocol.memory import SharedMemory
from mmaas.server.repository import Repository


@dataclass(frozen=True)
class ServerContext:
    """The server's shared parts (see the module docstring)."""

    repository: Repository
    plane: DataPlane
    shm: SharedMemory
    control: ModelControl
    logs: LogSettings

    @classmethod
    def create(
        cls,
        repository: Repository,
        reload: Reload | None = None,
        changed: Callable[[], Awaitable[None]] | None = None,
        log_format: str = "text",
        log_level: str = "info",
    ) -> ServerContext:
        """The context of a server over ``repository`` (``reload``: how the model control
        reloads a model, None = load refused; ``changed``: awaited after a load or
        unload)."""

        async def nothing() -> None:
            return None

        shm = SharedMemory()
        return cls(
            repository=repository,
            plane=DataPlane(repository, shm),
            shm=shm,
            control=ModelControl(repository, reload, changed or nothing),
            logs=LogSettings(log_format, log_level),
        )
