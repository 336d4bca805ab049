"""The runtime server's settings: ``MMAAS_*`` environment variables only.

The image sets them from ``runtime`` in model.yaml (the Dockerfile's ``ENV`` lines); a
deployer may override any of them. The server never reads model.yaml. Every variable,
its unit and its default:

==============================  ==============================================  ===================
variable                        meaning                                         default
==============================  ==============================================  ===================
MMAAS_MODEL_DIR                 model directory (manifest.json + engine)        /opt/mmaas/model
MMAAS_HOST                      address the HTTP, gRPC and metrics ports bind   0.0.0.0
MMAAS_HTTP_PORT                 KServe v2 HTTP/REST port; 0 = off               8000
MMAAS_GRPC_PORT                 KServe v2 gRPC port                             8001
MMAAS_METRICS_PORT              Prometheus ``/metrics`` HTTP port; 0 = off      8002
MMAAS_MAX_MESSAGE_SIZE          largest request/response message, bytes         derived (see below)
MMAAS_HTTP_READ_TIMEOUT_S       seconds an HTTP request's headers/body may take 30
MMAAS_MAX_CONCURRENT_STREAMS    HTTP/2 streams per connection; 0 = gRPC's       0
MMAAS_INSTANCE_COUNT            engine instances (parallel executions)          1
MMAAS_THREADS                   intra-op threads per instance; 0 = cores/count  0
MMAAS_EXPECTED_ENGINE           ``blake3:<hex>`` pin of the engine; empty = off (none)
MMAAS_TRUSTED_KEYS              Ed25519 public keys (PEM text, or PEM files,    (none: no check)
                                comma-separated); set = refuse an engine whose
                                manifest none of them signed
MMAAS_WARMUP_RUNS               warm-up runs at the profile's opt shapes        1
MMAAS_DYNAMIC_BATCHING          ``true``/``false``: stack concurrent requests   false
MMAAS_PREFERRED_BATCH_SIZES     comma list, e.g. ``4,8``; empty = max batch     (empty)
MMAAS_MAX_QUEUE_DELAY_US        how long a batch waits to fill, microseconds    100
MMAAS_MAX_QUEUE_SIZE            queued requests before RESOURCE_EXHAUSTED       1024
MMAAS_SHUTDOWN_GRACE_S          after SIGTERM: NOT_SERVING, ports open, s       25
MMAAS_MODEL_VERSION             Triton version number the model answers to      1
MMAAS_GRPC_KEEPALIVE_TIME_MS    server pings an idle connection after, ms       7200000
MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS ping unanswered this long closes it, ms         20000
MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS  accept client pings with no call    true
MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS  shortest client ping gap  5000
MMAAS_GRPC_HTTP2_MAX_PING_STRIKES  early pings before GOAWAY too_many_pings    2
MMAAS_LOG_FORMAT                ``text`` or ``json`` (JSON lines, stderr)       text
MMAAS_LOG_LEVEL                 ``debug`` (one line per request), ``info``...   info
MMAAS_TLS_CERT / MMAAS_TLS_KEY  PEM server certificate chain and private key    (plain text gRPC)
MMAAS_TLS_CLIENT_CA             PEM CA bundle; set = mutual TLS required        (none)
==============================  ==============================================  ===================

The keepalive variables are gRPC's server arguments of the same names (``grpc.keepalive_*``,
``grpc.http2.*``); the defaults accept a client that pings every 5 s or slower, with or
without calls in flight (gRPC's own would answer pings more often than every 5 minutes
with GOAWAY ``too_many_pings``). SIGTERM: see :mod:`mmaas.server.shutdown`.

``MMAAS_MAX_MESSAGE_SIZE`` unset means: twice the bytes of all inputs at the profile's
max shapes, and at least 64 MiB (so a 1x3x1280x1280 FP32 tensor, 19.7 MB, always fits).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mmaas.core.endpoints import shared_port
from mmaas.core.errors import UsageError

T = TypeVar("T")
MIN_MESSAGE_SIZE = 64 * 1024 * 1024
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


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
        max_queue_size: requests waiting for an instance before new ones get
            RESOURCE_EXHAUSTED (applies with batching off too).
    """

    enabled: bool = False
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 100
    max_queue_size: int = 1024


@dataclass(frozen=True)
class KeepaliveSettings:
    """gRPC's HTTP/2 keepalive (gRPC's ``doc/keepalive.md``), times in ms: the server pings
    a connection idle ``time_ms`` and closes it when unanswered ``timeout_ms``; a client ping
    sooner than ``min_ping_interval_without_data_ms`` after the last is a strike, and
    ``max_ping_strikes`` of them (0 = no limit) get GOAWAY ``too_many_pings``;
    ``permit_without_calls`` accepts pings with no call in flight."""

    time_ms: int = 7_200_000
    timeout_ms: int = 20_000
    permit_without_calls: bool = True
    min_ping_interval_without_data_ms: int = 5_000
    max_ping_strikes: int = 2

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
class Settings:
    """Everything the server is configured with; built by :func:`from_env`.

    ``max_message_size`` is in bytes, None = derive from the manifest (see module doc).
    ``threads`` is the intra-op thread count per engine instance, 0 = cores / instances.
    """

    model_dir: Path = Path("/opt/mmaas/model")
    host: str = "0.0.0.0"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    max_message_size: int | None = None
    max_concurrent_streams: int = 0
    http_read_timeout_s: float = 30.0
    instance_count: int = 1
    threads: int = 0
    expected_engine: str | None = None
    trusted_keys: str | None = None
    warmup_runs: int = 1
    batching: BatchingSettings = BatchingSettings()
    shutdown_grace_s: float = 25.0
    model_version: int = 1
    keepalive: KeepaliveSettings = KeepaliveSettings()
    log_format: str = "text"
    log_level: str = "info"
    tls: TlsSettings | None = None


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Read every ``MMAAS_*`` variable (see the module doc) from ``environ`` (default
    ``os.environ``); unset or empty variables take their defaults.

    Raises:
        UsageError: a value is malformed or out of range; the message names the variable,
            the value and what it accepts; or two endpoints share one port.
    """
    env = _Env(os.environ if environ is None else environ)
    settings = Settings(
        model_dir=Path(env.get("MMAAS_MODEL_DIR", str, "/opt/mmaas/model")),
        host=env.get("MMAAS_HOST", str, "0.0.0.0"),
        http_port=env.get("MMAAS_HTTP_PORT", _port_or_off, 8000),
        grpc_port=env.get("MMAAS_GRPC_PORT", _port, 8001),
        metrics_port=env.get("MMAAS_METRICS_PORT", _port_or_off, 8002),
        max_message_size=env.get("MMAAS_MAX_MESSAGE_SIZE", _positive, None),
        max_concurrent_streams=env.get("MMAAS_MAX_CONCURRENT_STREAMS", _non_negative, 0),
        http_read_timeout_s=env.get("MMAAS_HTTP_READ_TIMEOUT_S", _positive_seconds, 30.0),
        instance_count=env.get("MMAAS_INSTANCE_COUNT", _positive, 1),
        threads=env.get("MMAAS_THREADS", _non_negative, 0),
        expected_engine=env.get("MMAAS_EXPECTED_ENGINE", _blake3_pin, None),
        trusted_keys=env.get("MMAAS_TRUSTED_KEYS", str, None),
        warmup_runs=env.get("MMAAS_WARMUP_RUNS", _non_negative, 1),
        batching=BatchingSettings(
            enabled=env.get("MMAAS_DYNAMIC_BATCHING", _boolean, False),
            preferred_batch_sizes=env.get("MMAAS_PREFERRED_BATCH_SIZES", _size_list, ()),
            max_queue_delay_us=env.get("MMAAS_MAX_QUEUE_DELAY_US", _non_negative, 100),
            max_queue_size=env.get("MMAAS_MAX_QUEUE_SIZE", _positive, 1024),
        ),
        shutdown_grace_s=env.get("MMAAS_SHUTDOWN_GRACE_S", _seconds, 25.0),
        model_version=env.get("MMAAS_MODEL_VERSION", _positive, 1),
        keepalive=KeepaliveSettings(
            time_ms=env.get("MMAAS_GRPC_KEEPALIVE_TIME_MS", _positive, 7_200_000),
            timeout_ms=env.get("MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS", _positive, 20_000),
            permit_without_calls=env.get(
                "MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS", _boolean, True
            ),
            min_ping_interval_without_data_ms=env.get(
                "MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS", _non_negative, 5_000
            ),
            max_ping_strikes=env.get("MMAAS_GRPC_HTTP2_MAX_PING_STRIKES", _non_negative, 2),
        ),
        log_format=env.get("MMAAS_LOG_FORMAT", _choice(LOG_FORMATS), "text"),
        log_level=env.get("MMAAS_LOG_LEVEL", _choice(LOG_LEVELS), "info"),
        tls=_tls(env),
    )
    _check_ports_differ(settings)
    return settings


def _check_ports_differ(settings: Settings) -> None:
    """Each endpoint on its own port (:mod:`mmaas.core.endpoints`): two on one port would
    fail to bind."""
    ports = {
        "MMAAS_GRPC_PORT": settings.grpc_port,
        "MMAAS_HTTP_PORT": settings.http_port,
        "MMAAS_METRICS_PORT": settings.metrics_port,
    }
    clash = shared_port(list(ports.items()))
    if clash is not None:
        name, other = clash
        raise UsageError(
            f"{name}={ports[name]} is also {other}: each endpoint listens on its own port",
            hint=f"set {name} to another port (or 0 to turn it off)",
        )


class _Env:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def get(self, name: str, parse: Callable[[str], T], default: T) -> T:
        raw = self.environ.get(name, "").strip()
        if not raw:
            return default
        try:
            return parse(raw)
        except ValueError as exc:
            raise UsageError(f"{name}={raw!r}: {exc}") from None


def _tls(env: _Env) -> TlsSettings | None:
    cert = env.get("MMAAS_TLS_CERT", _pem_file, None)
    key = env.get("MMAAS_TLS_KEY", _pem_file, None)
    client_ca = env.get("MMAAS_TLS_CLIENT_CA", _pem_file, None)
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


def _integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError("not an integer") from None


def _positive(raw: str) -> int:
    value = _integer(raw)
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def _non_negative(raw: str) -> int:
    value = _integer(raw)
    if value < 0:
        raise ValueError("must be 0 or a positive integer")
    return value


def _port(raw: str) -> int:
    value = _integer(raw)
    if not 0 < value < 65536:
        raise ValueError("a TCP port is 1..65535")
    return value


def _port_or_off(raw: str) -> int:
    return 0 if raw == "0" else _port(raw)


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("not a number of seconds") from None
    if value < 0:
        raise ValueError("must be 0 or more seconds")
    return value


def _positive_seconds(raw: str) -> float:
    value = _seconds(raw)
    if value <= 0:
        raise ValueError("must be more than 0 seconds")
    return value


def _boolean(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError("write true or false")


def _size_list(raw: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({_positive(part.strip()) for part in raw.split(",")}))
    except ValueError:
        raise ValueError("write positive batch sizes separated by commas, e.g. 4,8") from None


def _blake3_pin(raw: str) -> str:
    algo, _, digest = raw.partition(":")
    if algo != "blake3" or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError("write blake3:<64 lowercase hex digits>, as manifest.json's engine.blake3")
    return raw


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(f"write one of {', '.join(choices)}")
        return raw.lower()

    return parse


def _pem_file(raw: str) -> Path:
    path = Path(raw)
    if not path.is_file():
        raise ValueError("no such file")
    return path
