"""model.yaml's ``runtime:``: the settings the image bakes in as ``MMAAS_*`` variables.

Every field is a row of the runtime settings table (:mod:`mmaas.core.runtime_settings`),
built by :func:`setting_field`: its default, its doc and limits in the JSON Schema, and the
row's own check, so a value out of its limits gets the text the server gives for the same
value in the variable (``runtime.instance_count: 100 is out of range; write a whole number
from 1 to 64``). The server reads only its environment; the plan writes the variables
(:func:`mmaas.build.runtime_env.runtime_env`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import AfterValidator, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from mmaas.core import runtime_settings as table
from mmaas.core.endpoints import shared_port
from mmaas.core.runtime_settings import Setting
from mmaas.core.setting_kinds import SettingValueError
from mmaas.spec.base import Strict

T = TypeVar("T")
SETTING_ERROR = "runtime_setting"  # the pydantic error type of a value out of a row's limits


def setting_field(setting: Setting[Any]) -> Any:
    """The pydantic field of one table row: the row's default (a list for a tuple), its
    doc, unit and variable as the description, its limits in the JSON Schema, and the row's
    check as an after-validator (strict type checks come first, and keep their messages).

    A value out of the limits raises a pydantic error of type :data:`SETTING_ERROR` whose
    message is the row's text (:class:`mmaas.core.setting_kinds.SettingValueError`)."""
    default = setting.default
    description = describe(setting)
    schema = setting.kind.json_schema
    if isinstance(default, tuple):  # a list in model.yaml
        info = FieldInfo(
            default_factory=lambda: list(default), description=description, json_schema_extra=schema
        )
    else:
        info = FieldInfo(default=default, description=description, json_schema_extra=schema)
    info.metadata.append(AfterValidator(_checked(setting)))
    return info


def describe(setting: Setting[Any]) -> str:
    """A field's JSON Schema description: the row's doc, unit and variable."""
    unit = f"; unit: {setting.kind.unit}" if setting.kind.unit else ""
    return f"{setting.doc}{unit}; the image's {setting.env}"


def _checked(setting: Setting[Any]) -> Any:
    def check(value: Any) -> Any:
        try:
            return setting.check(value)
        except SettingValueError as exc:
            raise PydanticCustomError(SETTING_ERROR, "{text}", {"text": str(exc)}) from None

    return check


class DynamicBatchingSpec(Strict):
    """Dynamic batching as Triton's ``dynamic_batching`` configures it; present (even as
    ``{}``) turns it on (``MMAAS_DYNAMIC_BATCHING=true``). Concurrent requests whose
    non-batch dims match are stacked along axis 0 up to ``max_batch_size``."""

    preferred_batch_size: list[int] = setting_field(table.PREFERRED_BATCH_SIZES)
    max_queue_delay_microseconds: int = setting_field(table.MAX_QUEUE_DELAY_US)
    max_queue_size: int = setting_field(table.MAX_QUEUE_SIZE)


class KeepaliveSpec(Strict):
    """The gRPC server's HTTP/2 keepalive (gRPC's ``grpc.keepalive_*`` and ``grpc.http2.*``
    server arguments), times in ms: the server pings a connection idle ``time_ms`` and
    drops it when a ping goes unanswered ``timeout_ms``; a client ping sooner than
    ``http2_min_ping_interval_without_data_ms`` after the last is a strike, and
    ``http2_max_ping_strikes`` strikes (0 = no limit) get GOAWAY ``too_many_pings``."""

    time_ms: int = setting_field(table.KEEPALIVE_TIME_MS)
    timeout_ms: int = setting_field(table.KEEPALIVE_TIMEOUT_MS)
    permit_without_calls: bool = setting_field(table.KEEPALIVE_PERMIT_WITHOUT_CALLS)
    http2_min_ping_interval_without_data_ms: int = setting_field(table.MIN_PING_INTERVAL_MS)
    http2_max_ping_strikes: int = setting_field(table.MAX_PING_STRIKES)


class RuntimeSpec(Strict):
    """Defaults baked into the image as ``MMAAS_*`` environment variables (the server reads
    only its environment). Each endpoint listens on its own port
    (:func:`mmaas.core.endpoints.shared_port`)."""

    http_port: int = setting_field(table.HTTP_PORT)
    grpc_port: int = setting_field(table.GRPC_PORT)
    metrics_port: int = setting_field(table.METRICS_PORT)
    max_message_size: int | None = setting_field(table.MAX_MESSAGE_SIZE)
    instance_count: int = setting_field(table.INSTANCE_COUNT)
    dynamic_batching: DynamicBatchingSpec | None = Field(
        default=None, description=describe(table.DYNAMIC_BATCHING)
    )
    shutdown_grace_seconds: float = setting_field(table.SHUTDOWN_GRACE_S)
    keepalive: KeepaliveSpec = Field(default_factory=KeepaliveSpec)

    @model_validator(mode="after")
    def _ports_differ(self) -> RuntimeSpec:
        keys = ("grpc_port", "http_port", "metrics_port")
        clash = shared_port([(key, getattr(self, key)) for key in keys])
        if clash is not None:
            key, other = clash
            raise ValueError(
                f"{key} {getattr(self, key)} is also {other}: each endpoint listens on its own "
                f"port; give {key} another port (or 0 to turn it off)"
            )
        return self

    def value(self, setting: Setting[T]) -> T | None:
        """What this ``runtime:`` gives the row ``setting``: the value at its key path;
        for a switch, True when its section is given; None when model.yaml gives it nothing
        (an environment-only row, a null, or a section left out: the server's default)."""
        node: Any = self
        for part in setting.key or ():
            node = getattr(node, part) if node is not None else None
        if setting.key is None or node is None:
            return None
        return True if setting.switch else node  # type: ignore[return-value]
