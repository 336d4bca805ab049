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

A request that finds an instance idle and nobody queued, when no batch could form around
it (batching off, or ``max_queue_delay_us`` 0), goes to that instance at once from the
caller's task, without the dispatcher's hop; every batch's outcome comes back to the
event loop in one call from the worker thread, which answers its callers and frees the
instance. The thread side (jobs, stacking, splitting) is :mod:`mmaas.server.batches`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from mmaas.backends import BatchingEngine, Engine
from mmaas.core.errors import InputError
from mmaas.server.batches import Arrays, Job, compute, compute_stacked_by
from mmaas.server.metrics import Execution, ModelMetrics
from mmaas.server.settings import BatchingSettings
from mmaas.server.status import DeadlineExceeded, ResourceExhausted, Unavailable

Outcome = tuple[list[Arrays], Execution]
LATE = "the request's deadline passed while it was queued; it was not computed"


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
        # no batch can form around a request that finds an instance idle: it runs at once
        self.direct = not self.max_batch or self.delay_s == 0
        self.max_queue_size = batching.max_queue_size
        self.metrics = metrics
        self.queue: deque[Job] = deque()
        self.wake = asyncio.Event()  # a request queued or an instance freed
        self.free: deque[Engine] = deque()  # idle instances, taken in turn
        self.busy = 0  # batches running
        self.forming = False  # the dispatcher is gathering a batch
        self.pool = ThreadPoolExecutor(len(self.engines), thread_name_prefix="mmaas-engine")
        # each instance's thread and batch runner, found once (a Protocol isinstance is slow)
        self.runners: dict[int, tuple[Executor, Callable[[Any, list[Job]], Outcome]]] = {
            id(e): (e.executor, compute_stacked_by)
            if isinstance(e, BatchingEngine)
            else (self.pool, compute)
            for e in self.engines
        }
        self.dispatcher: asyncio.Task[None] | None = None
        self.closing = False

    def start(self) -> None:
        """Start the dispatcher on the running event loop."""
        self.free.extend(self.engines)
        self.dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def infer(
        self, inputs: Arrays, outputs: Sequence[str], timeout_s: float | None
    ) -> Arrays:
        """Queue one request (or run it at once on an idle instance, module doc) and wait
        for its outputs (``{name: array}`` of ``outputs``).

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
        if self.direct and self.free and not self.queue:
            if timeout_s is not None and timeout_s <= 0:
                raise DeadlineExceeded(LATE)
            self._launch(self.free.popleft(), [job])
        else:
            self.queue.append(job)
            self.metrics.set_pending(len(self.queue))
            self.wake.set()
        return await job.future

    async def close(self) -> None:
        """Finish what is queued (requests whose callers left are dropped), stop
        dispatching, wait for running batches, and release the worker threads. New
        requests are refused from now on."""
        self.closing = True
        # a batch being formed holds requests off the queue, and a running one may queue
        # its requests again (each alone): the dispatcher stays until all are answered
        while (self.queue or self.busy or self.forming) and self._dispatching():
            await asyncio.sleep(0.005)
        if self.dispatcher is not None:
            self.dispatcher.cancel()
        while self.busy:
            await asyncio.sleep(0.005)
        self.pool.shutdown(wait=True)

    async def _dispatch(self) -> None:
        while True:
            while not (self.queue and self.free):
                self.wake.clear()
                await self.wake.wait()
            first = self._next_live_job()
            if first is not None:
                self.forming = True
                engine, batch = self.free.popleft(), await self._form_batch(first)
                self.forming = False
                self._launch(engine, batch)
                del batch
            del first  # while waiting for the next, keep no request's arrays (or shm) alive

    def _dispatching(self) -> bool:
        return self.dispatcher is not None and not self.dispatcher.done()

    async def _form_batch(self, first: Job) -> list[Job]:
        batch, rows = [first], first.rows
        if not self.max_batch or first.alone:
            return batch
        loop = asyncio.get_running_loop()
        close_at = loop.time() + self.delay_s
        while rows < self.max_batch and rows not in self.preferred:
            rows += self._take_matching(first.key, batch, self.max_batch - rows)
            remaining = close_at - loop.time()
            if rows >= self.max_batch or rows in self.preferred or remaining <= 0:
                break
            self.wake.clear()
            # the loop's timers wait whole milliseconds (epoll rounds up: a 100 us delay
            # took 1.1 ms), so wait the whole ones and poll the loop for the rest
            whole_ms = math.floor(remaining * 1e3) / 1e3
            if whole_ms <= 0:
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), whole_ms)
        return batch

    def _next_live_job(self) -> Job | None:
        while self.queue:
            job = self.queue.popleft()
            self.metrics.set_pending(len(self.queue))
            if self._live(job):
                return job
        return None

    def _take_matching(self, key: tuple[object, ...], batch: list[Job], room: int) -> int:
        taken = 0
        for job in list(self.queue):
            if job.key != key or job.alone or job.rows > room - taken:
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
            job.future.set_exception(DeadlineExceeded(LATE))
            return False
        return True

    def _launch(self, engine: Engine, batch: list[Job]) -> None:
        """Run ``batch`` on ``engine``'s worker thread; its outcome comes back to the loop
        in one call (:meth:`_finish`), however the callers fare meanwhile."""
        loop = asyncio.get_running_loop()
        started_ns = time.perf_counter_ns()
        self.busy += 1

        def back(done: Future[Outcome]) -> None:  # on the worker thread
            loop.call_soon_threadsafe(self._finish, engine, batch, done, started_ns)

        executor, work = self.runners[id(engine)]
        executor.submit(work, engine, batch).add_done_callback(back)

    def _finish(
        self, engine: Engine, batch: list[Job], done: Future[Outcome], started_ns: int
    ) -> None:
        """Answer ``batch``'s callers and free ``engine`` (on the event loop)."""
        self.busy -= 1
        self.free.append(engine)
        try:
            results, execution = done.result()
        except InputError as exc:
            if len(batch) == 1:
                _fail(batch, exc)
            else:  # values one request holds were refused: each runs alone, only it fails
                for job in reversed(batch):
                    job.alone = True
                    self.queue.appendleft(job)
                self.metrics.set_pending(len(self.queue))
        except Exception as exc:  # the engine's own error: every caller in the batch gets it
            _fail(batch, exc)
        else:
            self.metrics.record_execution(execution, [started_ns - j.enqueued_ns for j in batch])
            for job, result in zip(batch, results, strict=True):
                if not job.future.done():
                    job.future.set_result(result)
        if self.queue:
            self.wake.set()


def _fail(batch: list[Job], exc: Exception) -> None:
    for job in batch:
        if not job.future.done():
            job.future.set_exception(exc)
