"""The runtime side of ``pipeline:``: what a pipeline kind's runtime part implements and
what it is given (the loaded engines and the verified assets). The registry of kinds is
:data:`mmaas.core.pipelines.PIPELINES`; the contract is docs/design.md, "Pipelines".

The server builds one :class:`PipelineContext` after every engine and asset is verified
and every engine loaded, calls :meth:`PipelineRuntime.executor` off the event loop (so
blocking set-up such as reading a tokenizer is fine), starts the engines' executors and
then the pipeline's, and marks the pipeline model ready.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from mmaas.backends import Engine
from mmaas.core.manifest import Manifest, ModelInfo
from mmaas.core.pipelines import engine_checks, load_part
from mmaas.server.repository import Executor, ServedModel
from mmaas.server.settings import Settings


@dataclass(frozen=True)
class LoadedEngine:
    """One engine of the model, loaded.

    Attributes:
        name: its name in model.yaml (``model`` for a single-engine model.yaml).
        manifest: its engine manifest (``manifest.model``: its signature, named as served).
        directory: the folder of its files (``Runtime.load(directory, manifest)``).
        instances: ``MMAAS_INSTANCE_COUNT`` loaded, warmed-up engines (an ONNX Runtime
            session may be run from several threads at once).
        executor: the dynamic batcher over ``instances`` (its statistics are those of the
            engine's own model ``<name>-<engine>``, served or not).
    """

    name: str
    manifest: Manifest
    directory: Path
    instances: Sequence[Engine]
    executor: Executor


@dataclass(frozen=True)
class PipelineContext:
    """What a pipeline kind's runtime part gets.

    Attributes:
        model: the pipeline model itself (signature, statistics, config facts).
        settings: the kind's settings as JSON (as validated at build; the runtime part
            reads them into its own type: the image has no pydantic).
        engines: every engine of the model by name.
        assets: every asset by name: the verified file in the model directory.
        server: the server's ``MMAAS_*`` settings.
    """

    model: ServedModel
    settings: Mapping[str, Any]
    engines: Mapping[str, LoadedEngine]
    assets: Mapping[str, Path]
    server: Settings


class PipelineRuntime(Protocol):
    """The runtime part of a pipeline kind.

    Attributes:
        platform: Triton's ``platform`` its ModelConfig reports (``ensemble``...).
    """

    platform: str

    # Optional: ``decoupled: bool``, True when the executor streams (implements
    # :class:`mmaas.server.streaming.Decoupled`): ModelConfig's
    # ``model_transaction_policy.decoupled``, known before the executor is made.

    def executor(self, context: PipelineContext) -> Executor:
        """The executor of the pipeline model's requests (its ``infer`` gets inputs
        already checked against the pipeline's signature).

        Raises:
            MmaasError: the model cannot be served (a missing or malformed asset, engines
                that do not fit): the server refuses to start with this message.
        """
        ...


class CheckedExecutor:
    """An engine's executor behind a pipeline kind's request check (e.g. qwen2-vl: the
    vision engine's grid must describe its patches), for the engine served alone."""

    def __init__(self, executor: Executor, check: Callable[[Mapping[str, Any]], None]) -> None:
        self.executor, self.check = executor, check
        self.device_inputs = getattr(executor, "device_inputs", False)

    def start(self) -> None:
        """Nothing: the wrapped engine executor is started and closed by its owner
        (:func:`mmaas.server.models.attach_executors`, ``close_executors``)."""

    async def infer(
        self, inputs: dict[str, Any], outputs: Sequence[str], timeout_s: float | None
    ) -> dict[str, Any]:
        """Check ``inputs`` (InputError: INVALID_ARGUMENT), then run the wrapped executor."""
        self.check(inputs)
        return await self.executor.infer(inputs, outputs, timeout_s)

    async def close(self) -> None:
        """Nothing (see :meth:`start`)."""


def engine_check(info: ModelInfo) -> Callable[[Mapping[str, Any]], None] | None:
    """The request check a pipeline kind attaches to an engine with signature ``info``
    (:data:`mmaas.core.pipelines.PIPELINES`' ``engine_check``: recognised by its
    signature, wherever it is served), or None."""
    for check_for in engine_checks():
        check = check_for(info)
        if check is not None:
            return check  # type: ignore[no-any-return]
    return None


def get_pipeline_runtime(kind: str) -> PipelineRuntime:
    """The runtime part of ``kind``. Raises UsageError for an unknown kind."""
    return cast(PipelineRuntime, load_part(kind, "runtime"))
