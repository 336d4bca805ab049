"""``mmaas serve MODEL``: compile on this host and run the KServe v2 server, no Docker.

It binds 127.0.0.1 (:data:`LOCAL_HOST`) unless ``--host`` or ``MMAAS_HOST`` says
otherwise: a model served from a laptop is not offered to its network by default. The
image's server keeps 0.0.0.0 (a container's ports are published explicitly)."""

from __future__ import annotations

import os
from pathlib import Path

import click

LOCAL_HOST = "127.0.0.1"


@click.command("serve")
@click.argument("model", type=click.Path(path_type=Path))
@click.option(
    "--http-port", type=int, help="HTTP/REST port, 0 = off (default: MMAAS_HTTP_PORT, else 8000)."
)
@click.option("--grpc-port", type=int, help="gRPC port (default: MMAAS_GRPC_PORT, else 8001).")
@click.option(
    "--metrics-port",
    type=int,
    help="Prometheus port, 0 = off (default: MMAAS_METRICS_PORT, else 8002).",
)
@click.option(
    "--host", help=f"Address to bind (default: MMAAS_HOST, else {LOCAL_HOST}; 0.0.0.0 = all)."
)
@click.option("--rebuild", is_flag=True, help="Recompile even if a matching engine exists.")
def command(
    model: Path,
    http_port: int | None,
    grpc_port: int | None,
    metrics_port: int | None,
    host: str | None,
    rebuild: bool,
) -> None:
    """Serve MODEL (folder or model.yaml) on this host until Ctrl-C or SIGTERM.

    The engine is compiled into MODEL/.mmaas/engine exactly as the image's builder stage
    does (reused while the spec and the ONNX file are unchanged). Server settings are
    those of the image: `runtime:` in model.yaml (as the image's MMAAS_* variables),
    overridden by MMAAS_* variables in this environment, overridden by these options
    (each checked by the same rule as its variable, and named when refused);
    but it binds 127.0.0.1, not the image's 0.0.0.0, unless --host or MMAAS_HOST is set.
    """
    from mmaas.build.local import compile_local
    from mmaas.build.runtime_env import runtime_env
    from mmaas.core.runtime_settings import GRPC_PORT, HOST, HTTP_PORT, METRICS_PORT, MODEL_DIR
    from mmaas.core.setting_kinds import SettingValueError
    from mmaas.server.app import serve
    from mmaas.server.settings import from_env

    overrides = {}
    if host is None and not os.environ.get(HOST.env):
        host = LOCAL_HOST
    for option, setting, value in (
        ("--http-port", HTTP_PORT, http_port),
        ("--grpc-port", GRPC_PORT, grpc_port),
        ("--metrics-port", METRICS_PORT, metrics_port),
        ("--host", HOST, host),
    ):
        if value is not None:
            try:  # the table's rule, named by the option the user typed, before compiling
                setting.kind.parse(str(value))
            except SettingValueError as exc:
                raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None
            overrides[setting.env] = str(value)
    loaded, model_dir = compile_local(model, rebuild=rebuild)
    overrides[MODEL_DIR.env] = str(model_dir)
    serve(from_env({**runtime_env(loaded.spec), **os.environ, **overrides}))
