"""The runtime settings table: each row reads its variable's text with its kind's parse
and check, the first message names the variable, and the docs' table is made from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scripts import gen_schema as generator

from mmaas.core import runtime_settings as table
from mmaas.core.errors import UsageError
from mmaas.core.runtime_settings import SETTINGS, Environment, Setting


def test_every_row_is_in_the_table_in_order_of_declaration() -> None:
    declared = [value for value in vars(table).values() if isinstance(value, Setting)]
    assert declared == list(SETTINGS)


def test_rows_name_distinct_variables_and_keys() -> None:
    names = [setting.env for setting in SETTINGS]
    keys = [setting.key for setting in SETTINGS if setting.key is not None]
    assert len(set(names)) == len(names) and all(name.startswith("MMAAS_") for name in names)
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: setting.env)
def test_unset_or_blank_is_the_default_and_the_default_survives_its_text(
    setting: Setting[Any],
) -> None:
    assert setting.read({}) == setting.default
    assert setting.read({setting.env: "  "}) == setting.default
    assert setting.read({setting.env: setting.format(setting.default)}) == setting.default


@pytest.mark.parametrize(
    ("setting", "raw", "value"),
    [
        (table.HTTP_PORT, "0", 0),
        (table.MAX_PING_STRIKES, "0", 0),
        (table.THREADS, "0", 0),
        (table.INSTANCE_COUNT, " 64 ", 64),
        (table.SHUTDOWN_GRACE_S, "0", 0.0),
        (table.SHUTDOWN_GRACE_S, "12.5", 12.5),
        (table.DYNAMIC_BATCHING, "TRUE", True),
        (table.CUDA_GRAPHS, "0", False),
        (table.PREFERRED_BATCH_SIZES, "8, 4,4", (4, 8)),
        (table.LOG_LEVEL, "DEBUG", "debug"),
        (table.MAX_MESSAGE_SIZE, "2147483647", 2**31 - 1),
        (table.TRT_CACHE_DIR, "/cache", Path("/cache")),
    ],
    ids=lambda item: item.env if isinstance(item, Setting) else repr(item),
)
def test_values_within_the_limits_are_read(setting: Setting[Any], raw: str, value: Any) -> None:
    assert setting.read({setting.env: raw}) == value


SECONDS = "write a number of seconds"
BAD_VALUES = [
    (table.INSTANCE_COUNT, "two", "'two' is not a whole number; write a whole number from 1 to 64"),
    (table.INSTANCE_COUNT, "0", "0 is out of range; write a whole number from 1 to 64"),
    (table.HTTP_PORT, "-1", "-1 is out of range; write a TCP port from 1 to 65535, or 0 to "
     "turn it off"),
    (table.GRPC_PORT, "0", "0 is out of range; write a TCP port from 1 to 65535"),
    (table.MAX_MESSAGE_SIZE, "2147483648", "2147483648 is out of range; write a whole number "
     "of bytes from 1 to 2147483647"),
    (table.SHUTDOWN_GRACE_S, "nan", f"nan is out of range; {SECONDS} from 0 to 3600"),
    (table.SHUTDOWN_GRACE_S, "soon", f"'soon' is not a number; {SECONDS} from 0 to 3600"),
    (table.HTTP_READ_TIMEOUT_S, "0", f"0 is out of range; {SECONDS}, more than 0"),
    (table.HTTP_READ_TIMEOUT_S, "inf", f"inf is out of range; {SECONDS}, more than 0"),
    (table.DYNAMIC_BATCHING, "yes", "'yes' is not a boolean; write true or false"),
    (table.CUDA_GRAPHS, "off", "'off' is not a boolean; write true or false"),
    (table.PREFERRED_BATCH_SIZES, "4;8", "'4;8' is not a list of whole numbers; write them "
     "separated by commas, e.g. 4,8 (whole numbers, each 1 or more)"),
    (table.PREFERRED_BATCH_SIZES, "4,0", "0 is out of range; write whole numbers, each 1 or "
     "more"),
    (table.LOG_FORMAT, "xml", "'xml' is not allowed; write one of text, json"),
    (table.EXPECTED_ENGINE, "sha256:00", "'sha256:00' is not an engine pin; write blake3:<64 "
     "lowercase hex digits>, as manifest.json's engine.blake3"),
    (table.TLS_CERT, "/nonexistent.pem", "'/nonexistent.pem': no such file; write the path of "
     "an existing file"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "raw", "message"),
    BAD_VALUES,
    ids=lambda item: item.env if isinstance(item, Setting) else repr(item),
)
def test_a_bad_value_is_refused_naming_the_variable(
    setting: Setting[Any], raw: str, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        setting.read({setting.env: raw})
    assert str(caught.value) == f"{setting.env}: {message}"
    assert caught.value.exit_code == 2


def test_the_environment_checks_every_row_also_one_only_a_back_end_reads() -> None:
    assert Environment({})[table.INSTANCE_COUNT] == 1
    assert Environment({"MMAAS_INSTANCE_COUNT": "3"})[table.INSTANCE_COUNT] == 3
    with pytest.raises(UsageError, match="MMAAS_CUDA_GRAPHS: 'maybe' is not a boolean"):
        Environment({"MMAAS_CUDA_GRAPHS": "maybe"})


def test_the_docs_table_is_current() -> None:
    text = generator.RUNTIME_DOC.read_text()
    assert text == generator.render_settings_doc(text), (
        "docs/runtime.md's table of runtime settings is stale: run python scripts/gen_schema.py"
    )
    for setting in SETTINGS:
        assert f"| `{setting.env}` |" in text


def test_the_docs_table_needs_its_markers() -> None:
    with pytest.raises(ValueError, match="lacks the markers"):
        generator.render_settings_doc("# no table here\n")
