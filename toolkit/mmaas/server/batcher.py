"""The scheduler between requests and engine instances, with Triton-style dynamic batching.

One dispatcher task waits for an idle engine instance, takes the oldest queued request
and, when dynamic batching is on, adds queued requests whose inputs match it in every
non-batch dim (same datatypes, same requested outputs) until the batch reaches a
preferred batch size or the profile's max batch, or the first request has waited
``max_queue_delay_us``. The batch is stacked along axis 0, run once on that instance in
a worker thread, and each caller gets back its own rows. An engine that stacks batches
itself (:class:`~mmaas.backends.BatchingEngine`: a GPU instance copies each request's rows
straight into its device buffers) gets the requests as they are, on its own thread; any
other gets them stacked here, in host memory. Requests that cannot join run
in a later batch, alone if need be. When the engine refuses a batch for the values it
holds (:class:`~mmaas.core.errors.InputError`), each of its requests runs again alone, so
only the request at fault fails. A full queue is refused at once
(RESOURCE_EXHAUSTED); a request whose deadline passed or whose caller went away is
dropped before it reaches an engine. Triton: ``dynamic_batching`` in model config.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from mmaas.backends import BatchingEngine, Engine
from mmaas.core.errors import InputError
from mmaas.server.metrics import Execution, ModelMetrics
from mmaas.server.settings import BatchingSettings
from mmaas.server.status import DeadlineExceeded, RequestError, ResourceExhausted, Unavailable

Arrays = dict[str, np.ndarray]


@dataclass(eq=False)
class Job:
    """One request waiting for an engine: its decoded inputs, the outputs to return, the
    loop-time ``deadline`` (seconds, None = none) and the number of ``rows`` (axis 0)."""

    inputs: Arrays
    outputs: tuple[str, ...]
    future: asyncio.Future[Arrays]
    deadline: float | None
    rows: int
    key: tuple[object, ...]
    enqueued_ns: int = field(default_factory=time.perf_counter_ns)


class BatchError(RequestError):
    """The engine's outputs cannot be split back into the stacked requests (INTERNAL)."""


class Scheduler:
    """Queue + dispatcher over ``engines`` (one per instance). ``max_batch`` is the
    profile's axis-0 max (0 = the model does not batch: every request runs alone)."""

    def __init__(
        self,
        engines: Sequence[Engine],
        max_batch: int,
        batching: BatchingSettings,
        metrics: ModelMetrics,
    ) -> None:
        self.engines = list(engines)
        # device arrays (CUDA shared memory inputs) pass through only if every instance
        # takes them; the request path copies them to the host for any other executor
        self.device_inputs = all(
            isinstance(e, BatchingEngine) and e.device_inputs for e in self.engines
        )
        self.batch_axis = max_batch > 0
        self.max_batch = max_batch if batching.enabled else 0
        self.preferred = {size for size in batching.preferred_batch_sizes if size <= max_batch}
        self.delay_s = batching.max_queue_delay_us / 1e6
        self.max_queue_size = batching.max_queue_size
        self.metrics = metrics
        self.queue: deque[Job] = deque()
        self.arrived = asyncio.Event()
        self.idle: asyncio.Queue[Engine] = asyncio.Queue()
        self.pool = ThreadPoolExecutor(len(self.engines), thread_name_prefix="mmaas-engine")
        self.running: set[asyncio.Task[None]] = set()
        self.dispatcher: asyncio.Task[None] | None = None
        self.closing = False

    def start(self) -> None:
        """Start the dispatcher on the running event loop."""
        for engine in self.engines:
            self.idle.put_nowait(engine)
        self.dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        """Queue one request and wait for its outputs (``{name: array}`` of ``outputs``).

        Raises:
            ResourceExhausted: the queue already holds ``max_queue_size`` requests.
            DeadlineExceeded: ``timeout_s`` ran out before an instance took the request.
            Unavailable: the scheduler is closed (its model unloaded or the server
                draining), e.g. for a pipeline that still holds it.
            Exception: whatever the engine raised while running its batch.
        """
        if self.closing:
            raise Unavailable(
                f"model {self.metrics.labels['model']!r} is unloaded; load it again "
                "(repository extension) or retry on another replica"
            )
        if len(self.queue) >= self.max_queue_size:
            raise ResourceExhausted(
                f"queue full: {len(self.queue)} requests are waiting (MMAAS_MAX_QUEUE_SIZE="
                f"{self.max_queue_size}); retry later, or add instances (MMAAS_INSTANCE_COUNT)"
            )
        loop = asyncio.get_running_loop()
        rows = next(iter(inputs.values())).shape[0] if self.batch_axis and inputs else 1
        key = (tuple(outputs), *((n, a.dtype.str, a.shape[1:]) for n, a in inputs.items()))
        job = Job(
            inputs=inputs,
            outputs=tuple(outputs),
            future=loop.create_future(),
            deadline=None if timeout_s is None else loop.time() + timeout_s,
            rows=rows,
            key=key,
        )
        self.queue.append(job)
        self.metrics.set_pending(len(self.queue))
        self.arrived.set()
        return await job.future

    async def close(self) -> None:
        """Finish what is queued (requests whose callers left are dropped), stop
        dispatching, wait for running batches, and release the worker threads. New
        requests are refused from now on."""
        self.closing = True
        while self.queue and self.dispatcher is not None and not self.dispatcher.done():
            await asyncio.sleep(0.005)
        if self.dispatcher is not None:
            self.dispatcher.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        self.pool.shutdown(wait=True)

    async def _dispatch(self) -> None:
        while True:
            engine = await self.idle.get()
            batch = await self._form_batch()
            task = asyncio.get_running_loop().create_task(self._run(engine, batch))
            self.running.add(task)
            task.add_done_callback(self.running.discard)
            del batch  # while waiting for the next, keep no request's arrays (or shm) alive

    async def _form_batch(self) -> list[Job]:
        first = await self._next_live_job()
        batch, rows = [first], first.rows
        if not self.max_batch:
            return batch
        loop = asyncio.get_running_loop()
        close_at = loop.time() + self.delay_s
        while rows < self.max_batch and rows not in self.preferred:
            rows += self._take_matching(first.key, batch, self.max_batch - rows)
            remaining = close_at - loop.time()
            if rows >= self.max_batch or rows in self.preferred or remaining <= 0:
                break
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), remaining)
            except TimeoutError:
                rows += self._take_matching(first.key, batch, self.max_batch - rows)
                break
        return batch

    async def _next_live_job(self) -> Job:
        while True:
            while not self.queue:
                self.arrived.clear()
                await self.arrived.wait()
            job = self.queue.popleft()
            self.metrics.set_pending(len(self.queue))
            if self._live(job):
                return job

    def _take_matching(self, key: tuple[object, ...], batch: list[Job], room: int) -> int:
        taken = 0
        for job in list(self.queue):
            if job.key != key or job.rows > room - taken:
                continue
            self.queue.remove(job)
            if self._live(job):
                batch.append(job)
                taken += job.rows
                if taken == room or (sum(j.rows for j in batch) in self.preferred):
                    break
        self.metrics.set_pending(len(self.queue))
        return taken

    def _live(self, job: Job) -> bool:
        if job.future.done():  # the caller went away (cancelled RPC)
            return False
        if job.deadline is not None and asyncio.get_running_loop().time() >= job.deadline:
            job.future.set_exception(
                DeadlineExceeded(
                    "the request's deadline passed while it was queued; it was not computed"
                )
            )
            return False
        return True

    async def _run(self, engine: Engine, batch: list[Job]) -> None:
        try:
            await self._execute(engine, batch)
        finally:
            self.idle.put_nowait(engine)

    async def _execute(self, engine: Engine, batch: list[Job]) -> None:
        started_ns = time.perf_counter_ns()
        try:
            loop = asyncio.get_running_loop()
            if isinstance(engine, BatchingEngine):
                results, execution = await loop.run_in_executor(
                    engine.executor, _compute_stacked_by, engine, batch
                )
            else:
                results, execution = await loop.run_in_executor(self.pool, _compute, engine, batch)
            self.metrics.record_execution(execution, [started_ns - j.enqueued_ns for j in batch])
            for job, result in zip(batch, results, strict=True):
                if not job.future.done():
                    job.future.set_result(result)
        except InputError as exc:
            if len(batch) == 1:
                _fail(batch, exc)
            else:  # values one request holds were refused: each runs alone, only it fails
                for job in batch:
                    await self._execute(engine, [job])
        except Exception as exc:  # the engine's own error: every caller in the batch gets it
            _fail(batch, exc)


def _fail(batch: list[Job], exc: Exception) -> None:
    for job in batch:
        if not job.future.done():
            job.future.set_exception(exc)


def _compute_stacked_by(engine: BatchingEngine, batch: list[Job]) -> tuple[list[Arrays], Execution]:
    """Run one batch on an engine that stacks it itself (on its own thread)."""
    done = engine.infer_batch([job.inputs for job in batch], batch[0].outputs)
    rows = sum(job.rows for job in batch)
    execution = Execution(len(batch), rows, done.input_ns, done.infer_ns, done.output_ns)
    return done.outputs, execution


def _compute(engine: Engine, batch: list[Job]) -> tuple[list[Arrays], Execution]:
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
