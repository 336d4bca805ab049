"""The model repository: every model one server serves, looked up by name and version.

A server serves several named KServe v2 models (Triton's *model repository*): one per
engine of the image, plus the model a ``pipeline:`` composes from them (see
docs/design.md, "Model repository"). Each :class:`ServedModel` has its own signature
(``info``), readiness (``state``), statistics and metrics labels (``metrics``), message
limit and config facts, and an :class:`Executor` that computes its requests: the dynamic
batcher over its engine instances (:class:`mmaas.server.batcher.Scheduler`) for an engine,
the pipeline kind's own executor for a pipeline model. The request path
(:mod:`mmaas.server.dataplane`) finds the model with :meth:`Repository.get` (KServe v2
``model_name`` / ``model_version``; NOT_FOUND for anything else).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mmaas.core.manifest import ModelInfo
from mmaas.server.metrics import ModelMetrics
from mmaas.server.status import NotFound

Arrays = dict[str, np.ndarray]


class Executor(Protocol):
    """What computes one served model's requests (the batcher, or a pipeline's own).

    ``start`` is called on the server's running event loop once the model's engines are
    loaded, before the model turns ready; ``close`` when the server drains (finish what is
    queued or running, then release threads). Optional attribute ``device_inputs``: True
    when ``infer`` takes :class:`~mmaas.core.cuda.DeviceArray` inputs (CUDA shared memory)
    in place; without it the request path copies them to the host first."""

    def start(self) -> None:
        """Begin taking requests (create tasks on the running loop)."""
        ...

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        """Compute one request: ``inputs`` are checked against the model's signature
        (names, KServe v2 datatypes as numpy dtypes, shapes inside the profile); return the
        named ``outputs`` (numpy arrays). ``timeout_s``: seconds the client still waits,
        None = no deadline.

        Raises:
            RequestError subclasses (answered with their status), InputError
            (INVALID_ARGUMENT); anything else is answered INTERNAL as an engine failure.
        """
        ...

    async def close(self) -> None:
        """Finish in-flight work and release resources (server drain)."""
        ...


@dataclass(frozen=True)
class ConfigFacts:
    """Runtime facts a model's metadata and config report: Triton's ``platform``
    (``onnxruntime_onnx``, ``tensorrt_plan``; ``ensemble`` or the pipeline kind's own for a
    pipeline model) and instance kind (``CPU``/``GPU``) with the GPUs of a ``GPU`` kind
    (``gpus``: indices among the visible ones; empty = all), engine instances and dynamic
    batching (``preferred_batch_sizes`` and ``max_queue_delay_us`` only when ``batching``)."""

    platform: str
    device_kind: str
    instance_count: int
    batching: bool
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    decoupled: bool = False  # answers with many responses (:mod:`mmaas.server.streaming`)
    gpus: tuple[int, ...] = ()


@dataclass(eq=False)
class ServedModel:
    """One model of the repository: the signature (``info``: name, version, tensors,
    profile), the message limit in bytes, its statistics, its config facts, the executor
    (set when its engines are loaded), the ``state`` (``loading``, then ``ready``, then
    ``draining`` after SIGTERM; ``unloading``/``unloaded`` by the repository extension)
    and ``number``: its Triton version (a repository's version folder; Triton's version
    policy: tools such as perf_analyzer need an integer)."""

    info: ModelInfo
    message_limit: int
    metrics: ModelMetrics
    config: ConfigFacts
    executor: Executor | None = None
    state: str = "loading"
    number: int = 1

    @property
    def name(self) -> str:
        """The KServe v2 model name."""
        return self.info.name

    @property
    def version(self) -> str:
        """The version it reports (KServe v2 ``model_version``): ``number`` as a string."""
        return str(self.number)

    @property
    def versions(self) -> tuple[str, ...]:
        """Every version string it answers to besides "": ``number`` and the spec's
        version (``1`` and ``1.0.0`` by default)."""
        return tuple(dict.fromkeys((self.version, self.info.version)))

    @property
    def ready(self) -> bool:
        """True while requests are taken (KServe v2 ModelReady)."""
        return self.state == "ready" and self.executor is not None


class Repository:
    """The served models by name, each name holding one or more versions.

    Iteration yields the models in the order they were added (the manifest's order).
    """

    def __init__(self, models: Iterable[ServedModel] = ()) -> None:
        self._models: dict[str, dict[str, ServedModel]] = {}
        for model in models:
            self.add(model)

    def add(self, model: ServedModel) -> None:
        """Register ``model`` under its name and version.

        Raises:
            ValueError: that name and version are already registered (a build bug:
                the build refuses duplicate names before any image exists).
        """
        versions = self._models.setdefault(model.name, {})
        if model.version in versions:
            raise ValueError(f"model {model.name!r} version {model.version!r} is registered twice")
        versions[model.version] = model

    def get(self, name: str, version: str = "") -> ServedModel:
        """The model ``name`` at ``version`` ("" = its latest: the last one added; else
        any string in its :attr:`ServedModel.versions`).

        Raises:
            NotFound: no such model, or no such version of it (KServe v2 semantics); the
                message lists what this server serves.
        """
        versions = self._models.get(name)
        if versions is None:
            raise NotFound(
                f"unknown model {name!r} in model_name; this server serves {self.describe()}"
            )
        if not version:
            return list(versions.values())[-1]
        for model in versions.values():
            if version in model.versions:
                return model
        served = ", ".join(repr(v) for m in versions.values() for v in m.versions)
        raise NotFound(
            f"model {name!r} has no version {version!r} (model_version); it serves "
            f"version {served}, or leave model_version empty"
        )

    def describe(self) -> str:
        """``'a' (version '1' or '1.0.0'), 'b' (version '1')``: how messages list the
        served models."""
        served = [f"{m.name!r} (version {' or '.join(map(repr, m.versions))})" for m in self]
        return ", ".join(served) or "no models"

    @property
    def ready(self) -> bool:
        """True when the repository holds models and every one is ready (KServe v2
        ServerReady; gRPC health SERVING)."""
        models = list(self)
        return bool(models) and all(model.ready for model in models)

    def set_state(self, state: str) -> None:
        """Move every model to ``state`` (``ready`` needs its executor: see :attr:`ready`)."""
        for model in self:
            model.state = state

    def metrics(self) -> list[ModelMetrics]:
        """Every model's statistics, in repository order (for the metrics endpoint)."""
        return [model.metrics for model in self]

    def __iter__(self) -> Iterator[ServedModel]:
        for versions in self._models.values():
            yield from versions.values()

    def __len__(self) -> int:
        return sum(len(versions) for versions in self._models.values())
