"""Continuous batching on one engine thread, over the KV cache's slots (:mod:`.kvcache`).

Each turn of the loop:

1. take what arrived (it blocks only when nothing runs or waits);
2. admit waiting requests into free slots, lowest slot first, in arrival order (the vision
   engine for pictures not cached; the prompt's embeddings and positions); a request
   beyond the slots waits for one (its figures are in the log and the metrics); at most
   ``max_waiting`` (MMAAS_MAX_QUEUE_SIZE) wait: :meth:`Scheduler.submit` refuses one more
   at once (RESOURCE_EXHAUSTED, as a full batcher queue);
3. prefill up to ``max_prefill_tokens`` prompt tokens (padding counted): runs of
   consecutive slots holding new prompts are batched (each row's first chunk, right-padded
   to the longest), then continued prompts one at a time, each chunk at most the engine's
   ``prefill_chunk``; a row whose prompt is done gets its first token at once;
4. decode one token for every decoding slot in one step over slots 0 .. the highest one,
   padded to a captured batch;
5. rows that finished or whose client left give their slot back.

An engine failure ends the requests of the failed run only (their sinks get the error);
the loop goes on. Events go to each request's sink from this thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mmaas.pipelines.qwen2_vl.runtime.generation import Generator, Prepared, Sequence, TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.kvcache import Slots
from mmaas.pipelines.qwen2_vl.runtime.language import LanguageRuns, StepOut
from mmaas.server.llm_metrics import GenerationMetrics
from mmaas.server.status import ResourceExhausted

Sink = Callable[[TokenEvent | BaseException], None]


@dataclass
class Ticket:
    """One submitted request: where its events go, and its cancellation flag (set from any
    thread; the engine thread drops the row before its next run)."""

    prepared: Prepared
    sink: Sink
    arrived: float  # time.perf_counter() when the request came in
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        """Stop generating for this request (the client left)."""
        self.cancelled.set()


@dataclass
class Active:
    """A request holding a slot: its sequence and when its last token came out."""

    ticket: Ticket
    seq: Sequence
    last: float = 0.0


class Scheduler:
    """The engine thread, its inbox and its slots (see the module docstring). ``steps`` and
    ``rows`` count decode steps and the decoding rows they ran; ``max_waiting`` bounds the
    requests waiting for a slot (MMAAS_MAX_QUEUE_SIZE, at least 1)."""

    def __init__(self, generator: Generator, runs: LanguageRuns, slots: Slots, chunk: int,
                 max_prefill_tokens: int, metrics: GenerationMetrics,
                 max_waiting: int) -> None:  # fmt: skip
        self.generator, self.runs, self.slots = generator, runs, slots
        self.chunk, self.budget = chunk, max(max_prefill_tokens, chunk)
        self.metrics = metrics
        self.max_waiting = max_waiting
        self.lock = threading.Lock()  # submit's count against the engine thread's admits
        self.unplaced = 0  # tickets submitted that hold no slot yet (inbox and waiting)
        self.inbox: queue.Queue[Ticket | None] = queue.Queue()
        self.waiting: deque[Ticket] = deque()
        self.active: dict[int, Active] = {}
        self.thread: threading.Thread | None = None
        self.steps = self.rows = 0

    def start(self, warm_up: Callable[[], None]) -> None:
        """Start the engine thread; it runs ``warm_up`` (captures) first. Blocks until that
        is done; its error is raised here."""
        done: list[BaseException | None] = []
        ready = threading.Event()

        def main() -> None:
            try:
                warm_up()
                done.append(None)
            except BaseException as exc:  # reported to the starting thread
                done.append(exc)
                return
            finally:
                ready.set()
            self._loop()

        self.thread = threading.Thread(target=main, name="qwen2-vl-engine", daemon=True)
        self.thread.start()
        ready.wait()
        if done[0] is not None:
            raise done[0]

    def refuse_if_full(self) -> None:
        """Refuse a request that would wait beyond ``max_waiting`` (the requests holding no
        slot, less the free slots they will take, already number ``max_waiting``).

        Raises:
            ResourceExhausted: the queue is full (RESOURCE_EXHAUSTED / 429).
        """
        waiting = self.unplaced - len(self.slots.free)
        if waiting >= self.max_waiting:
            raise ResourceExhausted(
                f"queue full: {waiting} requests are waiting (MMAAS_MAX_QUEUE_SIZE="
                f"{self.max_waiting}) for one of the {self.slots.count} sequence slots; retry "
                "later, or raise pipeline.settings.max_sequences"
            )

    def submit(self, prepared: Prepared, sink: Sink, arrived: float | None = None) -> Ticket:
        """Queue a checked request that came in at ``arrived`` (``time.perf_counter``;
        None: now); ``sink`` gets each TokenEvent (the last one has a ``finish_reason``) or
        one exception, from the engine thread.

        Raises:
            ResourceExhausted: the queue is full (:meth:`refuse_if_full`); nothing queued.
        """
        ticket = Ticket(prepared, sink, time.perf_counter() if arrived is None else arrived)
        with self.lock:
            self.refuse_if_full()
            self.unplaced += 1
            self.inbox.put(ticket)
        return ticket

    def close(self, timeout_s: float | None = None) -> None:
        """Stop after the requests in flight (and those already queued) are done."""
        self.inbox.put(None)
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _loop(self) -> None:
        closing = False
        while not closing or self.active or self.waiting:
            idle = not self.active and not self.waiting
            while True:
                try:
                    ticket = self.inbox.get(block=idle and not closing)
                except queue.Empty:
                    break
                idle = False
                if ticket is None:
                    closing = True
                else:
                    self.waiting.append(ticket)
            self._drop_cancelled()
            self._admit()
            self._prefill()
            self._decode()
            self.metrics.set_sequences(len(self.active), len(self.waiting), self.slots.used,
                                       self.slots.count)  # fmt: skip

    def _drop_cancelled(self) -> None:
        kept = deque(t for t in self.waiting if not t.cancelled.is_set())
        with self.lock:
            self.unplaced -= len(self.waiting) - len(kept)
        self.waiting = kept
        for slot in [s for s, a in self.active.items() if a.ticket.cancelled.is_set()]:
            self._release(slot)

    def _admit(self) -> None:
        while self.waiting:
            with self.lock:
                slot = self.slots.take()
                if slot is None:
                    return
                self.unplaced -= 1
            ticket = self.waiting.popleft()
            try:
                seq = self.generator.admit(ticket.prepared)
            except Exception as exc:  # the vision engine failed: this request only
                self.slots.give_back(slot)
                ticket.sink(exc)
                continue
            self.active[slot] = Active(ticket, seq)

    def _prefill(self) -> None:
        spent = 0
        new = sorted(s for s, a in self.active.items() if a.seq.embeds is not None
                     and a.seq.prefilled == 0)  # fmt: skip
        while new and spent < self.budget:
            group = [new.pop(0)]
            while new and new[0] == group[-1] + 1 and self._cost(group + new[:1]) <= self.budget:
                group.append(new.pop(0))
            spent += self._cost(group)
            self._run_prefill(group)
        going = sorted(s for s, a in self.active.items() if a.seq.embeds is not None
                       and a.seq.prefilled > 0)  # fmt: skip
        for slot in going:
            if spent >= self.budget:
                return
            spent += self._cost([slot])
            self._run_prefill([slot])

    def _cost(self, group: list[int]) -> int:
        """Tokens (padding counted) of the next chunk of each slot of ``group``."""
        return len(group) * max(self._next_chunk(self.active[s].seq) for s in group)

    def _next_chunk(self, seq: Sequence) -> int:
        return min(self.chunk, seq.prompt - seq.prefilled)

    def _run_prefill(self, group: list[int]) -> None:
        seqs = [self.active[slot].seq for slot in group]
        lengths = [self._next_chunk(seq) for seq in seqs]
        width, hidden = max(lengths), seqs[0].embeds.shape[1]  # type: ignore[union-attr]
        embeds = np.zeros((len(group), width, hidden), np.float32)
        positions = np.zeros((3, len(group), width), np.int64)
        for row, (seq, n) in enumerate(zip(seqs, lengths, strict=True)):
            start = seq.prefilled
            embeds[row, :n] = seq.embeds[start : start + n]  # type: ignore[index]
            positions[:, row, :n] = seq.positions[:, start : start + n]  # type: ignore[index]
        try:
            out = self.runs.prefill(group[0], embeds, positions, lengths, seqs[0].prefilled)
        except Exception as exc:  # an engine failure ends these requests only
            for slot in group:
                self._fail(slot, exc)
            return
        for row, (slot, seq, n) in enumerate(zip(group, seqs, lengths, strict=True)):
            seq.prefilled += n
            if seq.prefilled == seq.prompt:
                seq.embeds = seq.positions = None
                seq.length = seq.prompt
                self._emit(slot, self._choose(seq, out, row))

    def _decode(self) -> None:
        decoding = sorted(s for s, a in self.active.items() if a.seq.embeds is None)
        if not decoding:
            return
        batch = self.runs.decode_batch(decoding[-1] + 1)
        embeds = np.zeros((batch, 1, self.runs.hidden), np.float32)
        positions = np.zeros((3, batch, 1), np.int64)
        seqlens = np.zeros(batch, np.int32)
        for slot, active in self.active.items():
            seq = active.seq
            if slot >= batch:
                continue
            if seq.embeds is not None:  # mid-prompt: the write lands where its next chunk goes
                seqlens[slot] = seq.prefilled
                continue
            embeds[slot, 0] = self.generator.embed[seq.pending]
            positions[:, slot, 0] = seq.length + seq.delta
            seqlens[slot] = seq.length
        try:
            out = self.runs.decode(embeds, positions, seqlens)
        except Exception as exc:  # every row of the failed step ends with the error
            for slot in decoding:
                self._fail(slot, exc)
            return
        self.steps += 1
        self.rows += len(decoding)
        for slot in decoding:
            seq = self.active[slot].seq
            seq.length += 1
            self._emit(slot, self._choose(seq, out, slot))

    def _choose(self, seq: Sequence, out: StepOut, row: int) -> int:
        token = seq.sampler.choose_top(out.top_logits[row], out.top_ids[row])
        return seq.sampler(out.logits()[row]) if token is None else token

    def _emit(self, slot: int, token: int) -> None:
        active = self.active[slot]
        event = self.generator.emit(active.seq, token)
        now = time.perf_counter()
        if len(active.seq.generated) == 1:
            self.metrics.first_token(now - active.ticket.arrived)
        else:
            self.metrics.inter_token(now - active.last)
        active.last = now
        active.seq.pending = token
        active.ticket.sink(event)
        if event.finish_reason:
            self._release(slot)

    def _fail(self, slot: int, exc: BaseException) -> None:
        self.active[slot].ticket.sink(exc)
        self._release(slot)

    def _release(self, slot: int) -> None:
        del self.active[slot]
        self.slots.give_back(slot)
