"""Continuous batching of decode steps across requests, on one engine thread.

A request is prefilled alone (batch 1), then joins the running decode batch and leaves it
when finished or cancelled, so no request waits for another's whole generation (only for
the prefills admitted before its next step). Beyond ``max_batch`` rows a request waits for
a free row, never for a whole queue.

The batch's cache is one left-padded tensor per layer [B, kv, T, D] (T = the longest row;
padding slots masked out, so each row computes what it would alone, up to FP32 summation
order). While the membership is unchanged a step's presents are the next step's past with
no copy; a join pads, a leave drops rows and trims the columns that are padding in every row.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, Prepared, Sequence, TokenEvent

Sink = Callable[[TokenEvent | BaseException], None]


@dataclass
class Ticket:
    """One submitted request: where its events go, and its cancellation flag (set from any
    thread; the engine thread drops the row before its next step)."""

    prepared: Prepared
    sink: Sink
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        """Stop generating for this request (the client left)."""
        self.cancelled.set()


@dataclass
class Batch:
    """The running decode batch: rows, their pending tokens, the cache and mask."""

    rows: list[tuple[Ticket, Sequence]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cache: list[np.ndarray] = field(default_factory=list)
    mask: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))


class Scheduler:
    """The engine thread and its inbox (see the module docstring). ``steps`` and ``rows``
    count decode steps and the rows they ran (mean batch occupancy = rows / steps)."""

    def __init__(self, generator: Generator, max_batch: int) -> None:
        self.generator = generator
        self.max_batch = max_batch
        self.inbox: queue.Queue[Ticket | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="qwen2-vl-engine", daemon=True)
        self.steps = 0
        self.rows = 0

    def start(self) -> None:
        """Start the engine thread."""
        self.thread.start()

    def submit(self, prepared: Prepared, sink: Sink) -> Ticket:
        """Queue a checked request; ``sink`` gets each TokenEvent (the last one has a
        ``finish_reason``) or one exception, from the engine thread."""
        ticket = Ticket(prepared, sink)
        self.inbox.put(ticket)
        return ticket

    def close(self, timeout_s: float | None = None) -> None:
        """Stop after the requests in flight (and those already queued) are done."""
        self.inbox.put(None)
        self.thread.join(timeout_s)

    def _loop(self) -> None:
        batch, closing = Batch(), False
        while not closing or batch.rows:
            while len(batch.rows) < self.max_batch and not closing:
                try:
                    ticket = self.inbox.get(block=not batch.rows)
                except queue.Empty:
                    break
                if ticket is None:
                    closing = True
                else:
                    self._admit(batch, ticket)
            if batch.rows:
                self._step(batch)

    def _admit(self, batch: Batch, ticket: Ticket) -> None:
        """Prefill one request and add it to the batch (unless it ended already)."""
        if ticket.cancelled.is_set():
            return
        try:
            seq, token, own, own_mask = self.generator.prefill(ticket.prepared)
            event = self.generator.emit(seq, token)
        except Exception as exc:  # an engine failure ends this request only
            ticket.sink(exc)
            return
        ticket.sink(event)
        if event.finish_reason:
            return
        batch.cache, batch.mask = join(batch.cache, batch.mask, own, own_mask)
        batch.rows.append((ticket, seq))
        batch.tokens.append(token)

    def _step(self, batch: Batch) -> None:
        """One decode step over the batch; finished and cancelled rows leave it."""
        seqs = [seq for _, seq in batch.rows]
        try:
            tokens, batch.cache, batch.mask = self.generator.decode(
                seqs, batch.tokens, batch.cache, batch.mask
            )
        except Exception as exc:  # every row of the failed step ends with the error
            for ticket, _ in batch.rows:
                ticket.sink(exc)
            batch.rows, batch.tokens, batch.cache = [], [], []
            batch.mask = np.zeros((0, 0), np.int64)
            return
        self.steps += 1
        self.rows += len(seqs)
        keep = []
        for index, ((ticket, seq), token) in enumerate(zip(batch.rows, tokens, strict=True)):
            if ticket.cancelled.is_set():
                continue
            event = self.generator.emit(seq, token)
            ticket.sink(event)
            if not event.finish_reason:
                keep.append(index)
        batch.tokens = tokens
        if len(keep) < len(batch.rows):
            batch.rows = [batch.rows[i] for i in keep]
            batch.tokens = [tokens[i] for i in keep]
            batch.cache, batch.mask = leave(batch.cache, batch.mask, keep)


def join(
    cache: list[np.ndarray], mask: np.ndarray, own: list[np.ndarray], own_mask: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """Append a prefilled sequence (its cache [1, kv, length, D], its mask [1, length]) to
    the batch, left-padding whichever side is shorter; returns the new cache and mask
    INT64 [B + 1, T]."""
    if not cache:
        return own, own_mask
    length = own_mask.shape[1]
    total = max(mask.shape[1], length)

    def pad(x: np.ndarray, by: int) -> np.ndarray:
        return x if by == 0 else np.pad(x, ((0, 0), (0, 0), (by, 0), (0, 0)))

    cache = [
        np.concatenate([pad(a, total - mask.shape[1]), pad(b, total - length)])
        for a, b in zip(cache, own, strict=True)
    ]
    row = np.pad(own_mask, ((0, 0), (total - length, 0)))
    mask = np.concatenate([np.pad(mask, ((0, 0), (total - mask.shape[1], 0))), row])
    return cache, mask


def leave(
    cache: list[np.ndarray], mask: np.ndarray, keep: list[int]
) -> tuple[list[np.ndarray], np.ndarray]:
    """Keep the rows ``keep``; drop the leading columns that are padding in every kept row."""
    if not keep:
        return [], np.zeros((0, 0), np.int64)
    mask = mask[keep]
    first = int(np.argmax(mask.any(axis=0)))
    return [np.ascontiguousarray(c[keep, :, first:]) for c in cache], mask[:, first:]
