"""The helper of the build tests that plan one model: its compile plan or its package plan,
as ``mmaas build`` makes them (mmaas.build.context)."""

from __future__ import annotations

from mmaas.build.context import compile_plan, package_plan


def plan_of(loaded, engine_dir=None, engine_key=None, buildkit=True, ca_bundle=None):
    """The compile plan of the single engine, or with ``engine_dir`` the package plan."""
    if engine_dir is not None:
        return package_plan(
            loaded, {"model": engine_key}, {"model": engine_dir}, ca_bundle, buildkit
        )
    return compile_plan(loaded, loaded.engines[0], engine_key, ca_bundle, buildkit)
