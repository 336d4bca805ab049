"""model.yaml's ``runtime:`` as the image's ENV lines: one per row model.yaml gives a value,
in table order, spelled as the server reads it (the golden Dockerfiles hold the defaults)."""

from __future__ import annotations

from mmaas.build.runtime_env import runtime_env, served_ports
from mmaas.server.settings import from_env
from mmaas.spec.model import ModelSpec
from mmaas.spec.runtime import RuntimeSpec


def spec_with(**runtime: object) -> ModelSpec:
    return ModelSpec(name="m", version="1", runtime=RuntimeSpec.model_validate(runtime))


def test_the_defaults_as_env_lines() -> None:
    assert list(runtime_env(spec_with()).items()) == [
        ("MMAAS_HTTP_PORT", "8000"),
        ("MMAAS_GRPC_PORT", "8001"),
        ("MMAAS_METRICS_PORT", "8002"),
        ("MMAAS_INSTANCE_COUNT", "1"),
        ("MMAAS_SHUTDOWN_GRACE_S", "25"),
        ("MMAAS_GRPC_KEEPALIVE_TIME_MS", "7200000"),
        ("MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS", "20000"),
        ("MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS", "true"),
        ("MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS", "5000"),
        ("MMAAS_GRPC_HTTP2_MAX_PING_STRIKES", "2"),
    ]


def test_a_message_size_is_written_only_when_given() -> None:
    assert "MMAAS_MAX_MESSAGE_SIZE" not in runtime_env(spec_with(max_message_size=None))
    env = runtime_env(spec_with(max_message_size=100_000_000, shutdown_grace_seconds=2.5))
    assert (env["MMAAS_MAX_MESSAGE_SIZE"], env["MMAAS_SHUTDOWN_GRACE_S"]) == ("100000000", "2.5")


def test_dynamic_batching_reaches_the_image_as_server_settings() -> None:
    batching = {"preferred_batch_size": [2, 4], "max_queue_delay_microseconds": 500}
    env = runtime_env(spec_with(dynamic_batching=batching))
    assert env["MMAAS_DYNAMIC_BATCHING"] == "true"
    assert env["MMAAS_PREFERRED_BATCH_SIZES"] == "2,4"
    settings = from_env(env)
    assert settings.batching.enabled
    assert settings.batching.preferred_batch_sizes == (2, 4)
    assert settings.batching.max_queue_delay_us == 500
    assert settings.batching.max_queue_size == 1024
    assert "MMAAS_DYNAMIC_BATCHING" not in runtime_env(spec_with())


def test_an_empty_dynamic_batching_turns_it_on_with_the_defaults() -> None:
    env = runtime_env(spec_with(dynamic_batching={}))
    assert (env["MMAAS_DYNAMIC_BATCHING"], env["MMAAS_PREFERRED_BATCH_SIZES"]) == ("true", "")
    assert (env["MMAAS_MAX_QUEUE_DELAY_US"], env["MMAAS_MAX_QUEUE_SIZE"]) == ("100", "1024")
    assert from_env(env).batching.preferred_batch_sizes == ()


def test_served_ports_leave_out_an_endpoint_turned_off() -> None:
    assert served_ports(spec_with(metrics_port=0)) == {"http": 8000, "grpc": 8001}
