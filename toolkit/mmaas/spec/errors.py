"""Turn pydantic validation errors on a model.yaml into located, actionable problems.

Each pydantic error's ``loc`` becomes a key path (``inputs[0].max[2]``) with the YAML line
and column of what the user wrote, and its message says what to write instead: a boolean,
null or number where text is meant gets "quote it: name: \"no\""; text where a boolean is
meant (``timing_cache: off``) gets "write true or false"; an unknown key gets the close
matches and the keys allowed there.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from mmaas.core.errors import SpecProblem
from mmaas.spec.model import NAME_PATTERN, REPOSITORY_PATTERN, TAG_PATTERN, ModelSpec
from mmaas.spec.parts import PART_PATTERN
from mmaas.spec.runtime import SETTING_ERROR
from mmaas.spec.yamlio import KeyPath, YamlDocument

_PATTERN_HELP = {
    NAME_PATTERN: "use lowercase letters, digits, '.', '_' and '-', starting with a letter "
    "or digit (at most 128 characters)",
    PART_PATTERN: "engine and asset names are lowercase letters, digits, '_' and '-', "
    "starting with a letter or digit (at most 63 characters)",
    r"^[0-9a-f]{64}$": "write the 64 lowercase hex digits of the digest",
    REPOSITORY_PATTERN: "an image repository is lowercase path components ([a-z0-9] with "
    "'.', '_' or '-' between), optionally after a registry HOST[:PORT]/, e.g. "
    "registry.example.com:5000/my-org/ppocr-det",
    TAG_PATTERN: "a tag is letters, digits, '_', '.' and '-' (no spaces), starting with a "
    "letter, digit or '_', at most 128 characters",
}


def problem_from_error(
    error: ErrorDetails, doc: YamlDocument, model: type[BaseModel] = ModelSpec
) -> SpecProblem:
    """One :class:`SpecProblem` for one pydantic error of ``model`` on ``doc.data`` (the
    whole model.yaml, or a section of it such as ``pipeline.settings``)."""
    path = data_path(error["loc"], doc.data)
    message = _message(error, path, doc, model)
    owner = _tensor_name(path, doc.data)
    return doc.problem(path, f"{owner}: {message}" if owner else message)


def data_path(loc: tuple[int | str, ...], data: Any) -> KeyPath:
    """The prefix of ``loc`` that indexes into ``data``, plus a final missing key; union
    member tags pydantic adds are dropped."""
    path: list[str | int] = []
    node = data
    loc = tuple(part for part in loc if part != "[key]")  # a dict key's own error
    for depth, part in enumerate(loc):
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_dict or in_list):
            if isinstance(node, dict) and isinstance(part, str) and depth == len(loc) - 1:
                path.append(part)
            break
        node = node[part]
        path.append(part)
    return tuple(path)


def _tensor_name(path: KeyPath, data: Any) -> str:
    if len(path) > 2 and path[0] == "engines" and isinstance(data.get("engines"), dict):
        section = data["engines"].get(path[1])
        return _tensor_name(path[2:], section) if isinstance(section, dict) else ""
    if len(path) < 3 or path[0] not in ("inputs", "outputs") or not isinstance(path[1], int):
        return ""
    entry = data[path[0]][path[1]]
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"{str(path[0])[:-1]} {name!r}" if isinstance(name, str) else ""


def _message(error: ErrorDetails, path: KeyPath, doc: YamlDocument, model: type[BaseModel]) -> str:
    kind, value = error["type"], error.get("input")
    key = path[-1] if path else ""
    if kind == "missing":
        return f"required key missing: add {key}:"
    if kind == "extra_forbidden":
        return _unknown_key(str(key), error["loc"], model)
    if kind == "string_type":
        return _not_text(value, key, doc.plain_text.get(doc.prefix + path))
    if kind == "bool_type":
        if isinstance(value, str):
            return (
                f"{value!r} is text, not a boolean; write true or false (yes/no/on/off are "
                "text in YAML 1.2)"
            )
        return f"expected true or false, got {_describe(value)}"
    if kind == "int_type":
        return _not_integer(value)
    if kind == "literal_error":
        return f"{value!r} is not allowed here; use one of: {error['ctx']['expected']}"
    if kind == "string_pattern_mismatch":
        pattern = error["ctx"]["pattern"]
        return f"{value!r} is not valid; {_PATTERN_HELP.get(pattern, f'must match {pattern}')}"
    if kind == SETTING_ERROR:  # a runtime setting out of its limits: the server's text
        return str(error["msg"])
    if kind == "value_error":
        return _shape_error(value, str(error["ctx"]["error"]))
    if kind in ("model_type", "dict_type"):
        return f"expected a mapping (key: value lines), got {_describe(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {_describe(value)}"
    return f"{error['msg']} (got {_describe(value)})"


def _not_text(value: Any, key: str | int, plain: str | None) -> str:
    if plain == "":
        return "is empty; write a value"
    if isinstance(value, (bool, int, float)) or value is None:
        written = plain if plain is not None else str(value)
        field = f"{key}: " if isinstance(key, str) else "- "
        return (
            f"{written} is read as {_describe(value)}, but text is meant here; quote it: "
            f'{field}"{written}"'
        )
    return f"expected text, got {_describe(value)}"


def _not_integer(value: Any) -> str:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return f"expected a number, got the text {value!r}; write it without quotes"
    return f"expected a whole number, got {_describe(value)}"


def _shape_error(value: Any, text: str) -> str:
    """Name the axis for a bad profile shape given in text form (``"1x-1x3"``)."""
    if isinstance(value, str) and "axis" not in text:
        for axis, part in enumerate(value.strip().split("x")):
            if not part.isdigit() or int(part) == 0:
                return (
                    f"{value!r}: axis {axis}: {part!r} is not a positive integer; write "
                    "sizes like '1x3x224x224' or [1, 3, 224, 224]"
                )
    return text


def _unknown_key(key: str, loc: tuple[int | str, ...], model: type[BaseModel]) -> str:
    allowed = _fields_at(loc[:-1], model)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key {key!r}; {hint}keys allowed here: {', '.join(allowed)}"


def _fields_at(loc: tuple[int | str, ...], root: type[BaseModel]) -> list[str]:
    model: type[BaseModel] | None = root
    mapping = False  # the previous part was a dict of models: this part is a key of it
    for part in loc:
        if isinstance(part, int) or model is None or mapping:
            mapping = False
            continue
        field = model.model_fields.get(part)
        model = _model_in(field.annotation) if field else None
        mapping = field is not None and _is_dict(field.annotation)
    return list(model.model_fields) if model else []


def _is_dict(annotation: Any) -> bool:
    if typing.get_origin(annotation) is dict:
        return True
    return any(_is_dict(arg) for arg in typing.get_args(annotation))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, typing.get_args(annotation))), None)


def _describe(value: Any) -> str:
    if value is None:
        return "no value (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value!r}"
    return "a list" if isinstance(value, list) else "a mapping"
