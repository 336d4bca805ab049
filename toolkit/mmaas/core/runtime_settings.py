"""The runtime settings table: every setting of the server, declared once.

Each row (:class:`Setting`) names the ``MMAAS_*`` variable the
server reads, the key under ``runtime:`` in model.yaml that sets it through the image (None
for a deployer's setting: keys, TLS files, logging...), its kind with its limits, its
default and one line of doc. Everything else reads this table:

* the spec (:mod:`mmaas.spec.runtime`): model.yaml's ``runtime:`` fields, their defaults,
  JSON Schema limits and docs, checked with each row's own check;
* the Dockerfile plan (:func:`mmaas.build.runtime_env.runtime_env`): the image's ``ENV``
  lines, one per row model.yaml gives a value;
* the server (:func:`mmaas.server.settings.from_env`): every row read and checked at start,
  so it refuses what model.yaml refuses, with the same message;
* the docs: the table in ``docs/runtime.md`` (``python scripts/gen_schema.py``).

Limits: the same on both sides. Those of gRPC's server arguments (message size, keepalive,
streams) stop at :data:`GRPC_INT_MAX`, the largest value gRPC's C core takes (a larger one
fails when the server starts). The order of :data:`SETTINGS` is the order of the image's
``ENV`` lines and of the docs table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from mmaas.core.errors import UsageError
from mmaas.core.setting_kinds import (
    Boolean,
    Choice,
    EnginePin,
    FilePath,
    Kind,
    Networks,
    Optional,
    SettingValueError,
    Text,
)
from mmaas.core.setting_numbers import Integer, Seconds, Sizes

T = TypeVar("T")
GRPC_INT_MAX = 2**31 - 1  # gRPC's channel arguments are C ints
MAX_INSTANCES = 64
PORT = "a TCP port"
PEM_FILE = Optional(FilePath(must_exist=True))  # unset: no TLS


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One row of the runtime settings table.

    Attributes:
        env: the ``MMAAS_*`` variable the server reads.
        kind: the value's type and limits.
        default: the value when the variable is unset or empty (and when model.yaml leaves
            the key out).
        doc: one line: what the setting does.
        key: its key path under ``runtime:`` in model.yaml; None for a setting only the
            environment sets (a deployer's: keys, TLS files, logging...).
        switch: the model.yaml key is a section whose presence is the value (given, even
            as ``{}``, = true; absent = the default); its variable is written only when on.
    """

    env: str
    kind: Kind[T]
    default: T
    doc: str
    key: tuple[str, ...] | None = None
    switch: bool = False

    @property
    def yaml_key(self) -> str:
        """``runtime.<key path>``, or ``""`` for an environment-only setting."""
        return "runtime." + ".".join(self.key) if self.key else ""

    def read(self, environ: Mapping[str, str]) -> T:
        """The value of :attr:`env` in ``environ``, parsed and checked; :attr:`default`
        when it is unset or blank.

        Raises:
            UsageError: the value is not one the setting takes:
                ``MMAAS_<NAME>: <the kind's message>``.
        """
        raw = environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            return self.kind.parse(raw)
        except SettingValueError as exc:
            raise UsageError(f"{self.env}: {exc}") from None

    def check(self, value: T) -> T:
        """``value`` when the kind's limits hold (see :meth:`Kind.check`)."""
        return self.kind.check(value)

    def format(self, value: T) -> str:
        """``value`` as the variable's text."""
        return self.kind.format(value)


MODEL_DIR = Setting(
    "MMAAS_MODEL_DIR", FilePath(), Path("/opt/mmaas/model"),
    "model directory (manifest.json, engines, assets); the image sets it",
)  # fmt: skip
HOST = Setting(
    "MMAAS_HOST", Text(), "0.0.0.0", "address the HTTP, gRPC and metrics ports bind"
)  # fmt: skip
HTTP_PORT = Setting(
    "MMAAS_HTTP_PORT", Integer(1, 65535, noun=PORT, zero="to turn it off"), 8000,
    "KServe v2 HTTP/REST port", key=("http_port",),
)  # fmt: skip
GRPC_PORT = Setting(
    "MMAAS_GRPC_PORT", Integer(1, 65535, noun=PORT), 8001,
    "KServe v2 gRPC port (also gRPC health and reflection)", key=("grpc_port",),
)  # fmt: skip
METRICS_PORT = Setting(
    "MMAAS_METRICS_PORT", Integer(1, 65535, noun=PORT, zero="to turn it off"), 8002,
    "Prometheus /metrics HTTP port", key=("metrics_port",),
)  # fmt: skip
INSTANCE_COUNT = Setting(
    "MMAAS_INSTANCE_COUNT", Integer(1, MAX_INSTANCES), 1,
    "engine instances: parallel executions, each with its own threads", key=("instance_count",),
)  # fmt: skip
MAX_MESSAGE_SIZE = Setting(
    "MMAAS_MAX_MESSAGE_SIZE", Optional(Integer(1, GRPC_INT_MAX, "bytes")), None,
    "largest request or response message; unset (null) = twice the bytes of all inputs at "
    "the profile's max shapes, at least 64 MiB",
    key=("max_message_size",),
)  # fmt: skip
SHUTDOWN_GRACE_S = Setting(
    "MMAAS_SHUTDOWN_GRACE_S", Seconds(0, 3600), 25.0,
    "after SIGTERM: health NOT_SERVING, ports open this long while in-flight requests "
    "finish, then exit 0",
    key=("shutdown_grace_seconds",),
)  # fmt: skip
KEEPALIVE_TIME_MS = Setting(
    "MMAAS_GRPC_KEEPALIVE_TIME_MS", Integer(1, GRPC_INT_MAX, "ms"), 7_200_000,
    "the gRPC server pings a connection idle this long", key=("keepalive", "time_ms"),
)  # fmt: skip
KEEPALIVE_TIMEOUT_MS = Setting(
    "MMAAS_GRPC_KEEPALIVE_TIMEOUT_MS", Integer(1, GRPC_INT_MAX, "ms"), 20_000,
    "a ping unanswered this long closes the connection", key=("keepalive", "timeout_ms"),
)  # fmt: skip
KEEPALIVE_PERMIT_WITHOUT_CALLS = Setting(
    "MMAAS_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS", Boolean(), True,
    "accept client pings with no call in flight", key=("keepalive", "permit_without_calls"),
)  # fmt: skip
MIN_PING_INTERVAL_MS = Setting(
    "MMAAS_GRPC_HTTP2_MIN_PING_INTERVAL_WITHOUT_DATA_MS", Integer(0, GRPC_INT_MAX, "ms"), 5_000,
    "a client ping sooner than this after the last is a strike (the default accepts a "
    "client pinging every 5 s or slower)",
    key=("keepalive", "http2_min_ping_interval_without_data_ms"),
)  # fmt: skip
MAX_PING_STRIKES = Setting(
    "MMAAS_GRPC_HTTP2_MAX_PING_STRIKES", Integer(1, GRPC_INT_MAX, zero="for no limit"), 2,
    "strikes before GOAWAY too_many_pings", key=("keepalive", "http2_max_ping_strikes"),
)  # fmt: skip
DYNAMIC_BATCHING = Setting(
    "MMAAS_DYNAMIC_BATCHING", Boolean(), False,
    "stack concurrent requests along axis 0, up to max_batch_size (model.yaml: the section "
    "given, even as {}, turns it on)",
    key=("dynamic_batching",), switch=True,
)  # fmt: skip
PREFERRED_BATCH_SIZES = Setting(
    "MMAAS_PREFERRED_BATCH_SIZES", Sizes(1), (),
    "batch sizes a batch is sent at as soon as reached (a variable: comma list, e.g. 4,8); "
    "none = the profile's max batch",
    key=("dynamic_batching", "preferred_batch_size"),
)  # fmt: skip
MAX_QUEUE_DELAY_US = Setting(
    "MMAAS_MAX_QUEUE_DELAY_US", Integer(0, unit="us"), 100,
    "how long the first request of a batch waits for more",
    key=("dynamic_batching", "max_queue_delay_microseconds"),
)  # fmt: skip
MAX_QUEUE_SIZE = Setting(
    "MMAAS_MAX_QUEUE_SIZE", Integer(1), 1024,
    "requests waiting for an instance (a generation pipeline's: for a sequence slot, each "
    "choice one) before new ones get RESOURCE_EXHAUSTED (with batching off too)",
    key=("dynamic_batching", "max_queue_size"),
)  # fmt: skip
HTTP_READ_TIMEOUT_S = Setting(
    "MMAAS_HTTP_READ_TIMEOUT_S", Seconds(0, exclusive=True), 30.0,
    "how long an HTTP request's headers and body may take to arrive (then 408)",
)  # fmt: skip
MAX_CONCURRENT_STREAMS = Setting(
    "MMAAS_MAX_CONCURRENT_STREAMS", Integer(1, GRPC_INT_MAX, zero="for gRPC's default"), 0,
    "HTTP/2 streams per gRPC connection",
)  # fmt: skip
THREADS = Setting(
    "MMAAS_THREADS", Integer(1, zero="for the usable cores shared out among the instances"), 0,
    "intra-op threads per engine instance",
)  # fmt: skip
WARMUP_RUNS = Setting(
    "MMAAS_WARMUP_RUNS", Integer(0), 1, "warm-up runs of each instance at the profile's opt shapes"
)  # fmt: skip
MODEL_VERSION = Setting(
    "MMAAS_MODEL_VERSION", Integer(1), 1, "the Triton version number the model answers to"
)  # fmt: skip
EXPECTED_ENGINE = Setting(
    "MMAAS_EXPECTED_ENGINE", Optional(EnginePin()), None,
    "pin of the engine (or engine set): the server refuses any other; unset = no pin",
)  # fmt: skip
TRUSTED_KEYS = Setting(
    "MMAAS_TRUSTED_KEYS", Optional(Text()), None,
    "Ed25519 public keys (PEM text, or PEM files, comma-separated): refuse an engine whose "
    "manifest none of them signed; unset = no signature check",
)  # fmt: skip
LOG_FORMAT = Setting(
    "MMAAS_LOG_FORMAT", Choice(("text", "json")), "text", "log lines on stderr: text or JSON lines"
)  # fmt: skip
LOG_LEVEL = Setting(
    "MMAAS_LOG_LEVEL", Choice(("debug", "info", "warning", "error")), "info",
    "the log level; debug writes one line per request",
)  # fmt: skip
TLS_CERT = Setting(
    "MMAAS_TLS_CERT", PEM_FILE, None,
    "PEM certificate chain of the server (with MMAAS_TLS_KEY); unset = plain text",
)  # fmt: skip
TLS_KEY = Setting(
    "MMAAS_TLS_KEY", PEM_FILE, None,
    "PEM private key of the server (with MMAAS_TLS_CERT)",
)  # fmt: skip
TLS_CLIENT_CA = Setting(
    "MMAAS_TLS_CLIENT_CA", PEM_FILE, None,
    "PEM CA bundle: set = clients must present a certificate it signed (mutual TLS)",
)  # fmt: skip
CUDA_GRAPHS = Setting(
    "MMAAS_CUDA_GRAPHS", Boolean(), True,
    "an ONNX Runtime GPU engine built with cuda_graphs captures and replays them; false = "
    "off at run time",
)  # fmt: skip
TRT_CACHE_DIR = Setting(
    "MMAAS_TRT_CACHE_DIR", FilePath(), Path("/tmp/mmaas-trt-cache"),
    "where ONNX Runtime's TensorRT provider keeps its engine and timing caches",
)  # fmt: skip
MAX_DECODE_BYTES = Setting(
    "MMAAS_MAX_DECODE_BYTES", Integer(1, unit="bytes"), 1 << 30,
    "bytes of decoded pictures in flight (width x height x 8 per picture) in a vision "
    "pipeline; requests beyond it wait, one over it alone is refused",
)  # fmt: skip
OPENAI_API_KEY = Setting(
    "MMAAS_OPENAI_API_KEY", Optional(Text()), None,
    "the key the OpenAI-compatible routes (/v1/...) ask in Authorization: Bearer; unset = "
    "no key asked (prefer MMAAS_OPENAI_API_KEY_FILE)",
)  # fmt: skip
OPENAI_API_KEY_FILE = Setting(
    "MMAAS_OPENAI_API_KEY_FILE", Optional(FilePath(must_exist=True)), None,
    "a file holding that key (a mounted secret), instead of MMAAS_OPENAI_API_KEY",
)  # fmt: skip
FETCH_PICTURES = Setting(
    "MMAAS_FETCH_PICTURES", Boolean(), True,
    "fetch the http(s) picture URLs of OpenAI chat requests; false = data: URLs only",
)  # fmt: skip
FETCH_TIMEOUT_S = Setting(
    "MMAAS_FETCH_TIMEOUT_S", Seconds(0, exclusive=True), 10.0,
    "one picture's whole fetch (connect, every redirect, the body) within this",
)  # fmt: skip
FETCH_MAX_BYTES = Setting(
    "MMAAS_FETCH_MAX_BYTES", Integer(1, unit="bytes"), 20 << 20,
    "largest fetched picture (the body, read no further); 20 MiB as OpenAI's image limit",
)  # fmt: skip
FETCH_MAX_REDIRECTS = Setting(
    "MMAAS_FETCH_MAX_REDIRECTS", Integer(0, 20), 3, "redirects one picture fetch follows",
)  # fmt: skip
FETCH_ALLOW = Setting(
    "MMAAS_FETCH_ALLOW", Networks(), (),
    "networks fetched from although loopback, private or link-local (refused otherwise)",
)  # fmt: skip

SETTINGS: tuple[Setting[Any], ...] = (
    MODEL_DIR, HOST, HTTP_PORT, GRPC_PORT, METRICS_PORT, INSTANCE_COUNT, MAX_MESSAGE_SIZE,
    SHUTDOWN_GRACE_S, KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS, KEEPALIVE_PERMIT_WITHOUT_CALLS,
    MIN_PING_INTERVAL_MS, MAX_PING_STRIKES, DYNAMIC_BATCHING, PREFERRED_BATCH_SIZES,
    MAX_QUEUE_DELAY_US, MAX_QUEUE_SIZE, HTTP_READ_TIMEOUT_S, MAX_CONCURRENT_STREAMS, THREADS,
    WARMUP_RUNS, MODEL_VERSION, EXPECTED_ENGINE, TRUSTED_KEYS, LOG_FORMAT, LOG_LEVEL, TLS_CERT,
    TLS_KEY, TLS_CLIENT_CA, CUDA_GRAPHS, TRT_CACHE_DIR, MAX_DECODE_BYTES, OPENAI_API_KEY,
    OPENAI_API_KEY_FILE, FETCH_PICTURES, FETCH_TIMEOUT_S, FETCH_MAX_BYTES, FETCH_MAX_REDIRECTS,
    FETCH_ALLOW,
)  # fmt: skip


class Environment:
    """Every row's value in one environment, each parsed and checked when this is made (so a
    bad value of any row, also one the server itself does not use, refuses the start).

    Raises:
        UsageError: a variable's value is not one its row takes (the first, in table order).
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._values = {setting: setting.read(environ) for setting in SETTINGS}

    def __getitem__(self, setting: Setting[T]) -> T:
        """The value of ``setting`` (a row of :data:`SETTINGS`)."""
        return cast(T, self._values[setting])
