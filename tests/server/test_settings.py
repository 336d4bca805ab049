"""Port rules shared by model.yaml's ``runtime:`` and the server's ``MMAAS_*`` ports: each
endpoint on its own port, 0 turning HTTP or metrics off (then it takes no port)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mmaas.core.errors import UsageError
from mmaas.server.settings import from_env
from mmaas.spec.model import RuntimeSpec


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
