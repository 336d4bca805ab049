"""``mmaas build --engine-cache-registry``: a bad address is a usage error before any Docker
work (the flags' effect is tested against Docker in tests/test_build_reuse.py)."""

from __future__ import annotations

from click.testing import CliRunner

from mmaas.cli import build as build_cli
from mmaas.core.errors import UsageError


def test_a_bad_registry_address_is_a_usage_error() -> None:
    outcome = CliRunner().invoke(
        build_cli.command, ["m", "--engine-cache-registry", "h/Up"], standalone_mode=False
    )
    assert isinstance(outcome.exception, UsageError)
    assert "HOST:PORT/NAMESPACE" in str(outcome.exception)
