"""The runtime server's settings: ``MMAAS_*`` environment variables only.

The image sets them from ``runtime`` in model.yaml (the Dockerfile's ``ENV`` lines); a
deployer may override any of them. The server never reads model.yaml. Every variable, its
unit, limits and default is a row of the runtime settings table
(:mod:`mmaas.core.runtime_settings`; the list in ``docs/runtime.md`` is made from it), and
:func:`from_env` reads every row with the row's own parse and check: the server refuses at
start what model.yaml refuses, with the same text after the variable's name.

The keepalive variables are gRPC's server arguments of the same names (``grpc.keepalive_*``,
``grpc.http2.*``); the defaults accept a client that pings every 5 s or slower, with or
without calls in flight (gRPC's own would answer pings more often than every 5 minutes
with GOAWAY ``too_many_pings``). SIGTERM: see :mod:`mmaas.server.shutdown`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mmaas.core import runtime_settings as table
from mmaas.core.endpoints import shared_port
from mmaas.core.errors import UsageError
from mmaas.core.runtime_settings import Environment

MIN_MESSAGE_SIZE = 64 * 1024 * 1024


@dataclass(frozen=True)
class TlsSettings:
    """PEM files for TLS: ``cert`` (chain) and ``key`` of the server; ``client_ca`` set
    means clients must present a certificate signed by it (mTLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class BatchingSettings:
    """Dynamic batching as Triton configures it (``dynamic_batching`` in config.pbtxt).

    Attributes:
        enabled: stack concurrent requests along axis 0 (needs ``max_batch_size > 0``).
        preferred_batch_sizes: batch sizes a batch is sent at as soon as reached; empty
            means the profile's max batch.
        max_queue_delay_us: how long the first request of a batch waits for more, in µs.
        max_queue_size: requests waiting for an instance (a generation pipeline: for a
            sequence slot, each choice counting) before new ones get RESOURCE_EXHAUSTED
            (applies with batching off too).
    """

    enabled: bool = table.DYNAMIC_BATCHING.default
    preferred_batch_sizes: tuple[int, ...] = table.PREFERRED_BATCH_SIZES.default
    max_queue_delay_us: int = table.MAX_QUEUE_DELAY_US.default
    max_queue_size: int = table.MAX_QUEUE_SIZE.default


@dataclass(frozen=True)
class KeepaliveSettings:
    """gRPC's HTTP/2 keepalive (gRPC's ``doc/keepalive.md``), times in ms: the server pings
    a connection idle ``time_ms`` and closes it when unanswered ``timeout_ms``; a client ping
    sooner than ``min_ping_interval_without_data_ms`` after the last is a strike, and
    ``max_ping_strikes`` of them (0 = no limit) get GOAWAY ``too_many_pings``;
    ``permit_without_calls`` accepts pings with no call in flight."""

    time_ms: int = table.KEEPALIVE_TIME_MS.default
    timeout_ms: int = table.KEEPALIVE_TIMEOUT_MS.default
    permit_without_calls: bool = table.KEEPALIVE_PERMIT_WITHOUT_CALLS.default
    min_ping_interval_without_data_ms: int = table.MIN_PING_INTERVAL_MS.default
    max_ping_strikes: int = table.MAX_PING_STRIKES.default

    def options(self) -> list[tuple[str, int]]:
        """The gRPC server arguments."""
        return [
            ("grpc.keepalive_time_ms", self.time_ms),
            ("grpc.keepalive_timeout_ms", self.timeout_ms),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            (
                "grpc.http2.min_ping_interval_without_data_ms",
                self.min_ping_interval_without_data_ms,
            ),
            ("grpc.http2.max_ping_strikes", self.max_ping_strikes),
        ]


@dataclass(frozen=True)
class FetchSettings:
    """How the OpenAI front end fetches http(s) picture URLs (:mod:`mmaas.server.openai.
    fetch`): on or off, the whole fetch's time in seconds, the body's byte cap, the
    redirects followed, the networks allowed although loopback, private or link-local."""

    enabled: bool = table.FETCH_PICTURES.default
    timeout_s: float = table.FETCH_TIMEOUT_S.default
    max_bytes: int = table.FETCH_MAX_BYTES.default
    max_redirects: int = table.FETCH_MAX_REDIRECTS.default
    allow: tuple[str, ...] = table.FETCH_ALLOW.default


@dataclass(frozen=True)
class Settings:
    """Everything the server is configured with; built by :func:`from_env`.

    ``max_message_size`` is in bytes, None = derive from the manifest (twice the bytes of
    all inputs at the max shapes, at least :data:`MIN_MESSAGE_SIZE`: a 1x3x1280x1280 FP32
    tensor, 19.7 MB, always fits).
    ``threads`` is the intra-op thread count per engine instance, 0 = cores / instances.
    """

    model_dir: Path = table.MODEL_DIR.default
    host: str = table.HOST.default
    http_port: int = table.HTTP_PORT.default
    grpc_port: int = table.GRPC_PORT.default
    metrics_port: int = table.METRICS_PORT.default
    max_message_size: int | None = table.MAX_MESSAGE_SIZE.default
    max_concurrent_streams: int = table.MAX_CONCURRENT_STREAMS.default
    http_read_timeout_s: float = table.HTTP_READ_TIMEOUT_S.default
    instance_count: int = table.INSTANCE_COUNT.default
    threads: int = table.THREADS.default
    expected_engine: str | None = table.EXPECTED_ENGINE.default
    trusted_keys: str | None = table.TRUSTED_KEYS.default
    warmup_runs: int = table.WARMUP_RUNS.default
    batching: BatchingSettings = BatchingSettings()
    shutdown_grace_s: float = table.SHUTDOWN_GRACE_S.default
    model_version: int = table.MODEL_VERSION.default
    keepalive: KeepaliveSettings = KeepaliveSettings()
    log_format: str = table.LOG_FORMAT.default
    log_level: str = table.LOG_LEVEL.default
    tls: TlsSettings | None = None
    openai_api_key: str | None = None  # the OpenAI routes' key; None = none asked
    max_decode_bytes: int = table.MAX_DECODE_BYTES.default  # a vision pipeline's pictures
    fetch: FetchSettings = FetchSettings()


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Read every row of the runtime settings table from ``environ`` (default
    ``os.environ``); unset or blank variables take their defaults.

    Raises:
        UsageError: a value is malformed or out of its limits
            (``MMAAS_INSTANCE_COUNT: 100 is out of range; write a whole number from 1 to
            64``: the text model.yaml's ``runtime.instance_count: 100`` gets); the TLS
            variables are set only in part; or two endpoints share one port.
    """
    env = Environment(os.environ if environ is None else environ)
    settings = Settings(
        model_dir=env[table.MODEL_DIR],
        host=env[table.HOST],
        http_port=env[table.HTTP_PORT],
        grpc_port=env[table.GRPC_PORT],
        metrics_port=env[table.METRICS_PORT],
        max_message_size=env[table.MAX_MESSAGE_SIZE],
        max_concurrent_streams=env[table.MAX_CONCURRENT_STREAMS],
        http_read_timeout_s=env[table.HTTP_READ_TIMEOUT_S],
        instance_count=env[table.INSTANCE_COUNT],
        threads=env[table.THREADS],
        expected_engine=env[table.EXPECTED_ENGINE],
        trusted_keys=env[table.TRUSTED_KEYS],
        warmup_runs=env[table.WARMUP_RUNS],
        batching=BatchingSettings(
            enabled=env[table.DYNAMIC_BATCHING],
            preferred_batch_sizes=env[table.PREFERRED_BATCH_SIZES],
            max_queue_delay_us=env[table.MAX_QUEUE_DELAY_US],
            max_queue_size=env[table.MAX_QUEUE_SIZE],
        ),
        shutdown_grace_s=env[table.SHUTDOWN_GRACE_S],
        model_version=env[table.MODEL_VERSION],
        keepalive=KeepaliveSettings(
            time_ms=env[table.KEEPALIVE_TIME_MS],
            timeout_ms=env[table.KEEPALIVE_TIMEOUT_MS],
            permit_without_calls=env[table.KEEPALIVE_PERMIT_WITHOUT_CALLS],
            min_ping_interval_without_data_ms=env[table.MIN_PING_INTERVAL_MS],
            max_ping_strikes=env[table.MAX_PING_STRIKES],
        ),
        log_format=env[table.LOG_FORMAT],
        log_level=env[table.LOG_LEVEL],
        tls=_tls(env),
        openai_api_key=_api_key(env),
        max_decode_bytes=env[table.MAX_DECODE_BYTES],
        fetch=FetchSettings(
            enabled=env[table.FETCH_PICTURES],
            timeout_s=env[table.FETCH_TIMEOUT_S],
            max_bytes=env[table.FETCH_MAX_BYTES],
            max_redirects=env[table.FETCH_MAX_REDIRECTS],
            allow=env[table.FETCH_ALLOW],
        ),
    )
    _check_ports_differ(settings)
    return settings


def _check_ports_differ(settings: Settings) -> None:
    """Each endpoint on its own port (:mod:`mmaas.core.endpoints`): two on one port would
    fail to bind."""
    ports = {
        table.GRPC_PORT.env: settings.grpc_port,
        table.HTTP_PORT.env: settings.http_port,
        table.METRICS_PORT.env: settings.metrics_port,
    }
    clash = shared_port(list(ports.items()))
    if clash is not None:
        name, other = clash
        raise UsageError(
            f"{name}={ports[name]} is also {other}: each endpoint listens on its own port",
            hint=f"set {name} to another port (or 0 to turn it off)",
        )


def _tls(env: Environment) -> TlsSettings | None:
    cert, key, client_ca = env[table.TLS_CERT], env[table.TLS_KEY], env[table.TLS_CLIENT_CA]
    if cert is None and key is None:
        if client_ca is not None:
            raise UsageError(
                "MMAAS_TLS_CLIENT_CA is set but MMAAS_TLS_CERT/MMAAS_TLS_KEY are "
                "not: mutual TLS needs the server's own certificate and key"
            )
        return None
    if cert is None or key is None:
        missing = "MMAAS_TLS_KEY" if key is None else "MMAAS_TLS_CERT"
        raise UsageError(f"{missing} is not set: TLS needs both MMAAS_TLS_CERT and MMAAS_TLS_KEY")
    return TlsSettings(cert=cert, key=key, client_ca=client_ca)


def _api_key(env: Environment) -> str | None:
    """The OpenAI routes' key: MMAAS_OPENAI_API_KEY_FILE's stripped text, or
    MMAAS_OPENAI_API_KEY; both set, or an empty file, is refused."""
    text, path = env[table.OPENAI_API_KEY], env[table.OPENAI_API_KEY_FILE]
    if path is None:
        return text
    if text is not None:
        raise UsageError("MMAAS_OPENAI_API_KEY and MMAAS_OPENAI_API_KEY_FILE are both set: set one")
    try:
        key = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"MMAAS_OPENAI_API_KEY_FILE: cannot read {path}: {exc}") from None
    if not key:
        raise UsageError(f"MMAAS_OPENAI_API_KEY_FILE: {path} is empty; write the key in it")
    return key
