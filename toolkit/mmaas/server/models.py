"""The repository of one model directory: which models it serves (docs/design.md, "Model
repository") and their executors once the engines are loaded.

From the manifest, before any engine is loaded: the pipeline model (``<name>``, when the
manifest has a pipeline) and every engine served alone (named as its manifest says:
``<name>`` for a single engine, else ``<name>-<engine>``), each ``loading``. Once the
bring-up has loaded the instances: a dynamic batcher per engine (set as its served model's
executor; an engine served only inside the pipeline keeps statistics of its own), then the
pipeline kind's executor over them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

from mmaas.backends import BatchingEngine, Engine, get_runtime
from mmaas.core.manifest import ModelInfo
from mmaas.core.model_manifest import ModelManifest, PipelineRecord
from mmaas.server import runtime
from mmaas.server.batcher import Scheduler
from mmaas.server.metrics import ModelMetrics
from mmaas.server.model_control import Reload
from mmaas.server.pipeline import (
    CheckedExecutor,
    LoadedEngine,
    PipelineContext,
    engine_check,
    get_pipeline_runtime,
)
from mmaas.server.repository import ConfigFacts, Executor, Repository, ServedModel
from mmaas.server.runtime import message_limit
from mmaas.server.settings import Settings


def plan_repository(settings: Settings, manifest: ModelManifest) -> Repository:
    """The models ``manifest`` serves, each ``loading`` (see the module docstring).

    Raises:
        UsageError: an unknown back end or pipeline kind.
    """
    models = [engine_model(settings, e.manifest.model) for e in manifest.served_engines()]
    if manifest.pipeline is not None:
        device = get_runtime(manifest.engines[0].manifest.model.backend).device_kind
        models.insert(0, pipeline_model(settings, manifest.pipeline, device))
    return Repository(models)


def engine_model(settings: Settings, info: ModelInfo) -> ServedModel:
    """An engine's served model: its back end's platform and device, the instances and
    dynamic batching the settings give (batching only with a batch axis)."""
    runtime_part = get_runtime(info.backend)
    batching = settings.batching.enabled and info.max_batch_size > 0
    facts = ConfigFacts(
        platform=runtime_part.platform,
        device_kind=runtime_part.device_kind,
        instance_count=settings.instance_count,
        batching=batching,
        preferred_batch_sizes=settings.batching.preferred_batch_sizes,
        max_queue_delay_us=settings.batching.max_queue_delay_us,
    )
    return _served(settings, info, facts)


def pipeline_model(settings: Settings, record: PipelineRecord, device_kind: str) -> ServedModel:
    """The pipeline's served model: its kind's platform, its engines' device kind."""
    runtime_part = get_pipeline_runtime(record.kind)
    facts = ConfigFacts(
        platform=runtime_part.platform,
        device_kind=device_kind,
        instance_count=1,
        batching=False,
        decoupled=getattr(runtime_part, "decoupled", False),
    )
    return _served(settings, record.model, facts)


def _served(settings: Settings, info: ModelInfo, facts: ConfigFacts) -> ServedModel:
    return ServedModel(
        info=info,
        message_limit=message_limit(settings, info),
        metrics=ModelMetrics(info.name, str(settings.model_version)),
        config=facts,
        number=settings.model_version,
    )


async def attach_executors(
    settings: Settings,
    manifest: ModelManifest,
    repository: Repository,
    instances: Mapping[str, Sequence[Engine]],
) -> dict[str, LoadedEngine]:
    """Make and start every executor over the loaded ``instances`` (by engine name), set
    them on the repository's models, engines first; return the loaded engines by name.
    The pipeline kind's executor is made in a worker thread.

    Raises:
        MmaasError: the pipeline kind refuses its engines or assets.
    """
    served = {model.name: model for model in repository}
    loaded: dict[str, LoadedEngine] = {}
    for entry in manifest.engines:
        info = entry.manifest.model
        model = served.get(info.name)
        metrics = model.metrics if model else ModelMetrics(info.name, str(settings.model_version))
        engines = instances[entry.name]
        scheduler = Scheduler(engines, max_batch(info), settings.batching, metrics)
        scheduler.start()
        check = engine_check(info)
        if model is not None:
            model.executor = CheckedExecutor(scheduler, check) if check else scheduler
            model.config = runs_on(model.config, engines)
        directory = settings.model_dir / entry.directory
        loaded[entry.name] = LoadedEngine(entry.name, entry.manifest, directory, engines, scheduler)
    if manifest.pipeline is not None:
        model = served[manifest.pipeline.model.name]
        model.executor = await pipeline_executor(settings, manifest, model, loaded)
        everything = [e for engine in loaded.values() for e in engine.instances]
        model.config = runs_on(model.config, everything)
    return loaded


def runs_on(facts: ConfigFacts, engines: Sequence[Engine]) -> ConfigFacts:
    """``facts`` with the instance group the loaded ``engines`` report (Triton's
    ``instance_group``): ``GPU`` with their GPUs when every one runs on a GPU (an ONNX
    Runtime GPU engine serving on the CPU provider reports ``CPU``); engines that report
    nothing keep their back end's kind."""
    kinds = {e.runs_on for e in engines if isinstance(e, BatchingEngine)}
    if len(kinds) != 1 or len(engines) != sum(isinstance(e, BatchingEngine) for e in engines):
        return facts
    (device,) = kinds
    return replace(facts, device_kind=device.kind, gpus=device.gpus)


async def pipeline_executor(
    settings: Settings,
    manifest: ModelManifest,
    model: ServedModel,
    loaded: dict[str, LoadedEngine],
) -> Executor:
    """The started executor of the pipeline ``model`` over the ``loaded`` engines (the
    mapping it gets is ``loaded`` itself: a reloaded engine replaces its entry)."""
    assert manifest.pipeline is not None
    assets = {asset.name: settings.model_dir / asset.file.path for asset in manifest.assets}
    context = PipelineContext(model, manifest.pipeline.settings, loaded, assets, settings)
    runtime_part = get_pipeline_runtime(manifest.pipeline.kind)
    executor = await asyncio.to_thread(runtime_part.executor, context)
    executor.start()
    return executor


def reloader(
    settings: Settings, manifest: ModelManifest, loaded: dict[str, LoadedEngine]
) -> Reload:
    """The model control's reload (Triton's repository extension): re-verify every file
    and the pin, then load and warm up the engine of an engine's model (replacing its
    entry in ``loaded``, which the pipeline reads), or remake the pipeline's executor."""

    async def reload(model: ServedModel) -> Executor:
        def bring_up() -> dict[str, list[Engine]]:
            runtime.verify(settings, manifest)
            return {
                e.name: runtime.load_instances(
                    settings, settings.model_dir / e.directory, e.manifest
                )
                for e in manifest.engines
                if e.manifest.model.name == model.name
            }

        fresh = await asyncio.get_running_loop().run_in_executor(None, bring_up)
        if not fresh:  # the pipeline model
            return await pipeline_executor(settings, manifest, model, loaded)
        ((name, engines),) = fresh.items()
        old = loaded[name]
        scheduler = Scheduler(
            engines, max_batch(old.manifest.model), settings.batching, model.metrics
        )
        scheduler.start()
        loaded[name] = LoadedEngine(name, old.manifest, old.directory, engines, scheduler)
        check = engine_check(old.manifest.model)
        return CheckedExecutor(scheduler, check) if check else scheduler

    return reload


async def close_executors(repository: Repository, loaded: Mapping[str, LoadedEngine]) -> None:
    """Close the pipeline's executor first, then every engine's (served or not), once."""
    engines = [engine.executor for engine in loaded.values()]
    for model in repository:
        if model.executor is not None and all(model.executor is not e for e in engines):
            await model.executor.close()
    for executor in engines:
        await executor.close()


def max_batch(info: ModelInfo) -> int:
    """The rows one engine run may take: ``max_batch_size`` bounded by every input's
    profile max on axis 0 (0 = no batch axis)."""
    if info.max_batch_size <= 0:
        return 0
    return min([info.max_batch_size, *(t.max[0] for t in info.inputs if t.max)])
