"""Protobuf messages as the JSON documents Triton's HTTP server prints: field names as
in the ``.proto``, 64-bit integers as JSON numbers (not protobuf-JSON strings: Triton's
core "fixes int64 fields to be actual numbers", ``model_config_utils.cc``, and
perf_analyzer reads statistics with rapidjson's ``GetUint64``), enums by name, scalar
and repeated fields always present, message fields and ``oneof``/``optional`` members
only when set. The HTTP documents are the messages gRPC answers
(:mod:`mmaas.server.protocol.messages`) converted here, so both front ends answer the same
content.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def to_json(message: Message) -> dict[str, Any]:
    """``message`` as a JSON-ready dict (see the module docstring)."""
    document: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and message.WhichOneof(oneof.name) != field.name:
            continue
        value = getattr(message, field.name)
        if _is_map(field):
            entry = field.message_type.fields_by_name["value"]
            document[field.name] = {key: _value(entry, item) for key, item in value.items()}
        elif field.is_repeated:
            document[field.name] = [_value(field, item) for item in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if message.HasField(field.name):
                document[field.name] = to_json(value)
        else:
            document[field.name] = _value(field, value)
    return document


def _is_map(field: FieldDescriptor) -> bool:
    return (
        field.is_repeated
        and field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value
