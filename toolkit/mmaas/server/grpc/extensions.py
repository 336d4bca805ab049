"""The Triton extensions of ``GRPCInferenceService`` beyond inference: system and CUDA
shared memory (:mod:`mmaas.server.protocol.memory`: registration by shared memory key or
by CUDA IPC handle; refused, naming why, where CUDA cannot be used), log settings and
trace settings (:mod:`mmaas.server.log_settings`). Each method converts the message, calls the
protocol-neutral part, converts back; a refusal's status name becomes the gRPC status.
"""

from __future__ import annotations

from typing import Any

from mmaas.server.context import ServerContext
from mmaas.server.log_settings import trace_settings
from mmaas.server.protocol.stubs import grpc_service_pb2 as service_pb2


class Extensions:
    """The extension RPCs over the server's shared memory registries and log settings."""

    def __init__(self, context: ServerContext) -> None:
        self.shm = context.shm
        self.logs = context.logs

    async def SystemSharedMemoryStatus(self, request: Any) -> Any:
        """The region ``name`` (NOT_FOUND if unknown), or every region; one unregistered
        while requests in flight use it is listed until they end (the message has no field
        to flag it: HTTP status says ``pending``)."""
        response = service_pb2.SystemSharedMemoryStatusResponse()
        for region in self.shm.system.status(request.name):
            if region.name in response.regions:  # a pending one of a name registered again
                continue
            response.regions[region.name].CopyFrom(
                service_pb2.SystemSharedMemoryStatusResponse.RegionStatus(
                    name=region.name,
                    key=region.key,
                    offset=region.offset,
                    byte_size=region.byte_size,
                )
            )
        return response

    async def SystemSharedMemoryRegister(self, request: Any) -> Any:
        """Map ``[offset, offset + byte_size)`` of the object ``key`` as region ``name``."""
        self.shm.register_system(request.name, request.key, request.offset, request.byte_size)
        return service_pb2.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request: Any) -> Any:
        """Unregister region ``name``, or every system region when it is empty (unmapped
        once the requests in flight that use it end)."""
        self.shm.system.unregister(request.name)
        return service_pb2.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(self, request: Any) -> Any:
        """The CUDA region ``name`` (NOT_FOUND if unknown), or every CUDA region."""
        response = service_pb2.CudaSharedMemoryStatusResponse()
        for region in self.shm.cuda.status(request.name):
            if region.name in response.regions:  # a pending one of a name registered again
                continue
            response.regions[region.name].CopyFrom(
                service_pb2.CudaSharedMemoryStatusResponse.RegionStatus(
                    name=region.name, device_id=region.device_id, byte_size=region.byte_size
                )
            )
        return response

    async def CudaSharedMemoryRegister(self, request: Any) -> Any:
        """Map the allocation of ``raw_handle`` (a CUDA IPC handle) as region ``name``."""
        self.shm.register_cuda(
            request.name, request.raw_handle, request.device_id, request.byte_size
        )
        return service_pb2.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request: Any) -> Any:
        """Release CUDA region ``name``, or every CUDA region when it is empty."""
        self.shm.cuda.unregister(request.name)
        return service_pb2.CudaSharedMemoryUnregisterResponse()

    async def LogSettings(self, request: Any) -> Any:
        """Apply the given settings (none = just read them); answer all of them."""
        changes = {
            key: getattr(value, value.WhichOneof("parameter_choice"))
            for key, value in request.settings.items()
            if value.WhichOneof("parameter_choice")
        }
        current = self.logs.update(changes) if changes else self.logs.current()
        response = service_pb2.LogSettingsResponse()
        for key, setting in current.items():
            entry = response.settings[key]
            if isinstance(setting, bool):
                entry.bool_param = setting
            elif isinstance(setting, int):
                entry.uint32_param = setting
            else:
                entry.string_param = setting
        return response

    async def TraceSetting(self, request: Any) -> Any:
        """Answer the (fixed: OFF) trace settings; refuse changing them, by name."""
        current = trace_settings({key: list(v.value) for key, v in request.settings.items()})
        response = service_pb2.TraceSettingResponse()
        for key, values in current.items():
            response.settings[key].value.extend(values)
        return response
