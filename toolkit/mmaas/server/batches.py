"""The worker-thread side of the scheduler (:mod:`mmaas.server.batcher`): one request
waiting for an engine (:class:`Job`), and one batch of them run on an engine instance,
stacked along axis 0 here in host memory (:func:`compute`) or by an engine that stacks
batches itself (:func:`compute_stacked_by`), each request's rows split back out. Times
are in ns, for Triton's statistics (:class:`~mmaas.server.metrics.Execution`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import numpy as np

from mmaas.backends import BatchingEngine, Engine
from mmaas.server.metrics import Execution
from mmaas.server.status import RequestError

Arrays = dict[str, np.ndarray]


@dataclass(eq=False)
class Job:
    """One request waiting for an engine: its decoded inputs, the outputs to return, the
    loop-time ``deadline`` (seconds, None = none), the number of ``rows`` (axis 0), the
    ``key`` requests must share to be stacked together, and ``alone``: it runs in a batch
    of its own (its batch was refused for the values one of its requests holds)."""

    inputs: Arrays
    outputs: tuple[str, ...]
    future: asyncio.Future[Arrays]
    deadline: float | None
    rows: int
    key: tuple[object, ...]
    enqueued_ns: int = field(default_factory=time.perf_counter_ns)
    alone: bool = False


class BatchError(RequestError):
    """The engine's outputs cannot be split back into the stacked requests (INTERNAL)."""


def compute_stacked_by(engine: BatchingEngine, batch: list[Job]) -> tuple[list[Arrays], Execution]:
    """Run one batch on an engine that stacks it itself (on its own thread)."""
    done = engine.infer_batch([job.inputs for job in batch], batch[0].outputs)
    rows = sum(job.rows for job in batch)
    execution = Execution(len(batch), rows, done.input_ns, done.infer_ns, done.output_ns)
    return done.outputs, execution


def compute(engine: Engine, batch: list[Job]) -> tuple[list[Arrays], Execution]:
    """Stack, run and split one batch (in a worker thread); times are in ns.

    Raises:
        BatchError: an output's axis 0 does not hold one row per stacked input row.
    """
    t0 = time.perf_counter_ns()
    first = batch[0]
    if len(batch) == 1:
        inputs = first.inputs
    else:
        inputs = {
            name: np.concatenate([job.inputs[name] for job in batch]) for name in first.inputs
        }
    t1 = time.perf_counter_ns()
    outputs = engine.infer(inputs, first.outputs)
    t2 = time.perf_counter_ns()
    if len(batch) == 1:
        results = [outputs]
    else:
        bounds = np.cumsum([job.rows for job in batch])
        for name, array in outputs.items():
            if array.ndim == 0 or array.shape[0] != bounds[-1]:
                raise BatchError(
                    f"output {name!r} has shape {list(array.shape)} for a batch "
                    f"of {bounds[-1]} rows; it has no batch axis, so set "
                    "MMAAS_DYNAMIC_BATCHING=false for this model"
                )
        pieces = {name: np.split(array, bounds[:-1]) for name, array in outputs.items()}
        results = [{name: pieces[name][i] for name in first.outputs} for i in range(len(batch))]
    t3 = time.perf_counter_ns()
    rows = sum(job.rows for job in batch)
    return results, Execution(
        requests=len(batch), batch_size=rows, input_ns=t1 - t0, infer_ns=t2 - t1, output_ns=t3 - t2
    )
