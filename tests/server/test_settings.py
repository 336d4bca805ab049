"""The server's settings are read from the runtime settings table: every row, with the
row's parse and check, so the server refuses at start what model.yaml refuses, with the
same text; the image's ENV lines read back as the spec's values; and the port rules shared
with model.yaml's ``runtime:`` (each endpoint on its own port, 0 turning HTTP or metrics
off, then it takes no port)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import pytest
from pydantic import ValidationError

from mmaas.build.runtime_env import runtime_env
from mmaas.core import runtime_settings as table
from mmaas.core.errors import UsageError
from mmaas.core.runtime_settings import Setting
from mmaas.server.settings import Settings, from_env
from mmaas.spec.model import ModelSpec
from mmaas.spec.runtime import RuntimeSpec
from settings_values import KEYED, other_value, runtime_data

# Where Settings keeps each row's value. The TLS rows make Settings.tls; the back end reads
# its own rows (checked by from_env all the same).
FIELDS = {
    "MMAAS_MODEL_DIR": "model_dir",
    "MMAAS_HOST": "host",
    "MMAAS_HTTP_PORT": "http_port",
    "MMAAS_GRPC_PORT": "grpc_port",
    "MMAAS_METRICS_PORT": "metrics_port",
    "MMAAS_INSTANCE_COUNT": "instance_count",
    "MMAAS_MAX_MESSAGE_SIZE": "max_message_size",
    "MMAAS_SHUTDOWN_GRACE_S": "shutdown_grace_s",
    "MMAAS_GRPC_KEEPALIVE_TIME_MS": "keepalive.time_ms",
    "MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS": "keepalive.timeout_ms",
    "MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS": "keepalive.permit_without_calls",
    "MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS": (
        "keepalive.min_ping_interval_without_data_ms"
    ),
    "MMAAS_GRPC_HTTP2_MAX_PING_STRIKES": "keepalive.max_ping_strikes",
    "MMAAS_DYNAMIC_BATCHING": "batching.enabled",
    "MMAAS_PREFERRED_BATCH_SIZES": "batching.preferred_batch_sizes",
    "MMAAS_MAX_QUEUE_DELAY_US": "batching.max_queue_delay_us",
    "MMAAS_MAX_QUEUE_SIZE": "batching.max_queue_size",
    "MMAAS_HTTP_READ_TIMEOUT_S": "http_read_timeout_s",
    "MMAAS_MAX_CONCURRENT_STREAMS": "max_concurrent_streams",
    "MMAAS_THREADS": "threads",
    "MMAAS_WARMUP_RUNS": "warmup_runs",
    "MMAAS_MODEL_VERSION": "model_version",
    "MMAAS_EXPECTED_ENGINE": "expected_engine",
    "MMAAS_TRUSTED_KEYS": "trusted_keys",
    "MMAAS_LOG_FORMAT": "log_format",
    "MMAAS_LOG_LEVEL": "log_level",
    "MMAAS_MAX_DECODE_BYTES": "max_decode_bytes",
    "MMAAS_FETCH_PICTURES": "fetch.enabled",
    "MMAAS_FETCH_TIMEOUT_S": "fetch.timeout_s",
    "MMAAS_FETCH_MAX_BYTES": "fetch.max_bytes",
    "MMAAS_FETCH_MAX_REDIRECTS": "fetch.max_redirects",
    "MMAAS_FETCH_ALLOW": "fetch.allow",
}
TLS = {table.TLS_CERT.env, table.TLS_KEY.env, table.TLS_CLIENT_CA.env}
BACK_END = {table.CUDA_GRAPHS.env, table.TRT_CACHE_DIR.env}
API_KEY = {table.OPENAI_API_KEY.env, table.OPENAI_API_KEY_FILE.env}  # make openai_api_key


def test_every_row_has_a_place() -> None:
    assert set(FIELDS) | TLS | BACK_END | API_KEY == {setting.env for setting in table.SETTINGS}


def test_the_openai_key_comes_from_a_file_or_a_variable(tmp_path) -> None:
    assert from_env({}).openai_api_key is None
    assert from_env({"MMAAS_OPENAI_API_KEY": "k1"}).openai_api_key == "k1"
    secret = tmp_path / "key"
    secret.write_text("k2\n")
    assert from_env({"MMAAS_OPENAI_API_KEY_FILE": str(secret)}).openai_api_key == "k2"
    with pytest.raises(UsageError, match="both set"):
        from_env({"MMAAS_OPENAI_API_KEY_FILE": str(secret), "MMAAS_OPENAI_API_KEY": "k1"})
    secret.write_text("  \n")
    with pytest.raises(UsageError, match="is empty"):
        from_env({"MMAAS_OPENAI_API_KEY_FILE": str(secret)})


@pytest.mark.parametrize(
    "setting", [s for s in table.SETTINGS if s.env in FIELDS], ids=lambda s: s.env
)
def test_the_server_defaults_to_the_rows_default(setting: Setting[Any]) -> None:
    assert attrgetter(FIELDS[setting.env])(from_env({})) == setting.default


def test_the_settings_defaults_are_the_tables() -> None:
    assert Settings() == from_env({})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MMAAS_INSTANCE_COUNT": "100"},
         "MMAAS_INSTANCE_COUNT: 100 is out of range; write a whole number from 1 to 64"),
        ({"MMAAS_SHUTDOWN_GRACE_S": "99999"},
         "MMAAS_SHUTDOWN_GRACE_S: 99999 is out of range; write a number of seconds from 0 to 3600"),
        ({"MMAAS_CUDA_GRAPHS": "maybe"},
         "MMAAS_CUDA_GRAPHS: 'maybe' is not a boolean; write true or false"),
        ({"MMAAS_FETCH_ALLOW": "10.0.0.0/8, intranet"},
         "MMAAS_FETCH_ALLOW: 'intranet' is not an IP network; write IP networks or addresses, "
         "comma-separated (e.g. 10.0.0.0/8,fd00::/8)"),
        ({"MMAAS_FETCH_TIMEOUT_S": "0"},
         "MMAAS_FETCH_TIMEOUT_S: 0 is out of range; write a number of seconds, more than 0"),
    ],
)  # fmt: skip
def test_the_server_refuses_at_start_what_model_yaml_refuses(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        from_env(env)
    assert str(caught.value) == message


def test_the_image_env_lines_read_back_as_the_specs_values() -> None:
    values = {setting: other_value(setting) for setting in KEYED}
    runtime = RuntimeSpec.model_validate(runtime_data(values))
    spec = ModelSpec(name="m", version="1", runtime=runtime)
    env = runtime_env(spec)
    assert set(env) == {setting.env for setting in KEYED}  # every row given, every line written
    settings = from_env(env)
    for setting in KEYED:
        written = runtime.value(setting)
        if isinstance(written, list):
            written = tuple(sorted(set(written)))  # the server reads sizes ascending
        read = attrgetter(FIELDS[setting.env])(settings)
        assert read == written != setting.default, setting.env


def test_fetch_networks_are_read_normalised() -> None:
    read = from_env({"MMAAS_FETCH_ALLOW": "127.0.0.1, 10.1.2.3/8,fd00::/8,127.0.0.1"})
    assert read.fetch.allow == ("127.0.0.1/32", "10.0.0.0/8", "fd00::/8")


def test_tls_needs_a_certificate_and_its_key(tmp_path) -> None:
    pem = tmp_path / "server.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(UsageError, match="MMAAS_TLS_KEY is not set"):
        from_env({"MMAAS_TLS_CERT": str(pem)})
    with pytest.raises(UsageError, match="mutual TLS needs the server's own certificate"):
        from_env({"MMAAS_TLS_CLIENT_CA": str(pem)})
    tls = from_env({"MMAAS_TLS_CERT": str(pem), "MMAAS_TLS_KEY": str(pem)}).tls
    assert tls is not None and (tls.cert, tls.key, tls.client_ca) == (pem, pem, None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MMAAS_GRPC_PORT": "9000", "MMAAS_HTTP_PORT": "9000"},
         "MMAAS_HTTP_PORT=9000 is also MMAAS_GRPC_PORT"),
        ({"MMAAS_METRICS_PORT": "8001"}, "MMAAS_METRICS_PORT=8001 is also MMAAS_GRPC_PORT"),
        ({"MMAAS_METRICS_PORT": "8000"}, "MMAAS_METRICS_PORT=8000 is also MMAAS_HTTP_PORT"),
    ],
)  # fmt: skip
def test_the_server_refuses_two_endpoints_on_one_port(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        from_env(env)
    assert caught.value.exit_code == 2 and "another port (or 0 to turn it off)" in str(caught.value)


def test_endpoints_turned_off_take_no_port() -> None:
    settings = from_env({"MMAAS_HTTP_PORT": "0", "MMAAS_METRICS_PORT": "0"})
    assert (settings.grpc_port, settings.http_port, settings.metrics_port) == (8001, 0, 0)
    assert RuntimeSpec(http_port=0, metrics_port=0).grpc_port == 8001


def test_the_spec_refuses_the_metrics_port_on_the_grpc_one() -> None:
    with pytest.raises(ValidationError, match="metrics_port 8001 is also grpc_port"):
        RuntimeSpec(metrics_port=8001)
