"""model.yaml's ``runtime:`` is made from the runtime settings table: the same fields,
defaults, limits and docs as the server's variables, and a value out of its limits gets the
text the server gives for the same value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from scripts import gen_schema as generator

from mmaas.build.spec_checks import host_checks
from mmaas.core import runtime_settings as table
from mmaas.core.errors import SpecError, SpecProblem, UsageError
from mmaas.core.runtime_settings import Setting
from mmaas.server.settings import from_env
from mmaas.spec.load import parse_spec
from mmaas.spec.runtime import DynamicBatchingSpec, KeepaliveSpec, RuntimeSpec
from settings_values import KEYED, LIMITED, outside

SECTIONS: dict[tuple[str, ...], type[BaseModel]] = {
    (): RuntimeSpec,
    ("dynamic_batching",): DynamicBatchingSpec,
    ("keepalive",): KeepaliveSpec,
}
HEAD = 'name: m\nversion: "1"\nsource: {path: model.onnx}\n'


def runtime_problem(tmp_path: Path, setting: Setting[Any], value: Any) -> SpecProblem:
    """The problem model.yaml gets for ``value`` at ``setting``'s key (its file:line:col)."""
    assert setting.key is not None
    nested: Any = value
    for part in reversed(setting.key):
        nested = {part: nested}
    with pytest.raises(SpecError) as caught:
        parse_spec(
            HEAD + f"runtime: {json.dumps(nested)}\n", tmp_path / "model.yaml", checks=host_checks()
        )
    found = [p for p in caught.value.problems if p.key_path == setting.yaml_key]
    assert len(found) == 1, caught.value.problems
    return found[0]


def server_message(setting: Setting[Any], value: Any) -> str:
    raw = setting.format(tuple(value) if isinstance(value, list) else value)
    with pytest.raises(UsageError) as caught:
        from_env({setting.env: raw})
    return str(caught.value)


@pytest.mark.parametrize(
    ("setting", "value"),
    [(setting, value) for setting in LIMITED for value in outside(setting)],
    ids=lambda item: item.env if isinstance(item, Setting) else repr(item),
)
def test_a_value_out_of_limits_gets_the_servers_text(
    tmp_path: Path, setting: Setting[Any], value: Any
) -> None:
    problem = runtime_problem(tmp_path, setting, value)
    assert server_message(setting, value) == f"{setting.env}: {problem.message}"
    assert problem.message.endswith(f"is out of range; write {setting.kind.expects}")


def test_every_row_with_limits_has_values_out_of_them() -> None:
    assert all(outside(setting) for setting in LIMITED)
    assert {setting.env for setting in LIMITED} >= {
        "MMAAS_INSTANCE_COUNT", "MMAAS_SHUTDOWN_GRACE_S", "MMAAS_GRPC_PORT",
    }  # fmt: skip


def test_instance_count_100_is_refused_as_the_server_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    text = HEAD + "runtime:\n  instance_count: 100\n  shutdown_grace_seconds: 99999\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, path, checks=host_checks())
    lines = [str(problem) for problem in caught.value.problems]
    assert (
        f"{path}:5:19: runtime.instance_count: 100 is out of range; write a whole number "
        "from 1 to 64"
    ) in lines
    assert (
        f"{path}:6:27: runtime.shutdown_grace_seconds: 99999 is out of range; write a number "
        "of seconds from 0 to 3600"
    ) in lines


def test_wrong_types_keep_the_yaml_messages(tmp_path: Path) -> None:
    problem = runtime_problem(tmp_path, table.INSTANCE_COUNT, "4")
    assert problem.message == "expected a number, got the text '4'; write it without quotes"


@pytest.mark.parametrize("setting", KEYED, ids=lambda setting: setting.env)
def test_the_spec_defaults_to_the_rows_default(setting: Setting[Any]) -> None:
    assert setting.key is not None
    *section, name = setting.key
    default = getattr(SECTIONS[tuple(section)](), name)
    if setting.switch:
        assert default is None and setting.default is False  # left out = off
    else:
        assert (tuple(default) if isinstance(default, list) else default) == setting.default


@pytest.mark.parametrize(("section", "model"), SECTIONS.items(), ids=lambda item: repr(item))
def test_each_spec_field_is_a_row_or_a_section(
    section: tuple[str, ...], model: type[BaseModel]
) -> None:
    rows = {s.key[-1] for s in KEYED if s.key is not None and tuple(s.key[:-1]) == section}
    nested = {key[len(section)] for key in SECTIONS if len(key) == len(section) + 1}
    assert set(model.model_fields) == rows | nested


@pytest.mark.parametrize("setting", KEYED, ids=lambda setting: setting.env)
def test_the_json_schema_carries_each_rows_limits_and_doc(setting: Setting[Any]) -> None:
    schema = json.loads(generator.SCHEMA_PATH.read_text())
    assert setting.key is not None
    *section, name = setting.key
    model = SECTIONS[tuple(section)].__name__
    field = schema["$defs"][model]["properties"][name]
    assert setting.doc in field["description"] and setting.env in field["description"]
    limits: dict[str, Any] = {}
    setting.kind.json_schema(limits)
    for key, value in limits.items():
        assert field[key] == ({**field[key], **value} if isinstance(value, dict) else value)


def test_dynamic_batching_given_empty_is_on_and_a_null_message_size_is_derived() -> None:
    runtime = RuntimeSpec.model_validate({"dynamic_batching": {}, "max_message_size": None})
    assert runtime.value(table.DYNAMIC_BATCHING) is True
    assert runtime.value(table.MAX_QUEUE_SIZE) == 1024
    assert runtime.value(table.MAX_MESSAGE_SIZE) is None
    assert RuntimeSpec().value(table.DYNAMIC_BATCHING) is None
    assert RuntimeSpec().value(table.MAX_QUEUE_SIZE) is None  # section left out
    assert RuntimeSpec().value(table.HOST) is None  # environment only
