"""The language engine's runs over the KV cache, through the back end's bound-engine
capability (:class:`mmaas.backends.bound.BoundEngine`; the interface and its modes:
:mod:`mmaas.core.decoder`). Nothing here knows which back end or device it runs on.

* The cache: one array per layer and kind [rows, kv_heads, capacity, head_dim], allocated
  once; a run binds the rows of its slots in place as both its past and its present.
* Prefill: the prompt chunks of slots ``first .. first + batch - 1`` (new prompts batched,
  or one continued prompt), from host arrays; only the top candidates (and, when asked,
  the logits) of each row's last prompt token come back.
* Decode: one token per slot of ``0 .. batch - 1`` for a batch of :attr:`batches`, captured
  once per batch size at start (a CUDA graph on a GPU) over input arrays of its own and
  replayed each step after the step's embeddings, positions and lengths are copied in; a
  step of fewer rows runs in the next captured batch (C43), the extra rows being free or
  mid-prompt slots whose write lands where nothing is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mmaas.backends.bound import BoundEngine, DeviceArray, Graph
from mmaas.core import decoder
from mmaas.pipelines.qwen2_vl.config import LanguageDims

log = logging.getLogger("mmaas.server")


@dataclass
class StepOut:
    """A run's top candidates FP32 / INT64 [batch, TOP_K] (on the host) and its logits FP32
    [batch, vocab], copied to the host only when first asked for."""

    top_logits: np.ndarray
    top_ids: np.ndarray
    fetch: Callable[[], np.ndarray]
    cached: list[np.ndarray] = field(default_factory=list)

    def logits(self) -> np.ndarray:
        """The whole logits (one device-to-host copy per run at most)."""
        if not self.cached:
            self.cached.append(self.fetch())
        return self.cached[0]


@dataclass
class DecodeGraph:
    """One captured decode batch: its input and output arrays and the graph."""

    batch: int
    inputs: dict[str, DeviceArray]
    outputs: dict[str, DeviceArray]
    graph: Graph


def decode_batches(limit: int, graphs: bool, ceiling: int) -> list[int]:
    """The decode batch sizes captured for ``limit`` sequences, none past ``ceiling`` (the
    engine profile's batch): with graphs 1, 2, 4, then multiples of 8 (vLLM's sizes) up to
    the first that holds ``limit`` (``limit`` itself when none within the ceiling does);
    without graphs every size up to ``limit`` (a bound run costs nothing to keep)."""
    if not graphs:
        return list(range(1, limit + 1))
    sizes = [b for b in (1, 2, 4, *range(8, limit + 8, 8)) if b <= ceiling]
    top = next((b for b in sizes if b >= limit), limit)
    return sorted({b for b in sizes if b < top} | {top})


class LanguageRuns:
    """Prefill and decode runs over the cache (module doc)."""

    def __init__(self, bound: BoundEngine, dims: LanguageDims, capacity: int, rows: int,
                 cache_type: str) -> None:  # fmt: skip
        self.bound, self.capacity = bound, capacity
        self.layers, self.hidden, self.vocab = dims.num_layers, dims.hidden_size, dims.vocab_size
        shape = (rows, dims.kv_heads, capacity, dims.head_dim)
        self.cache = [bound.allocate(shape, cache_type) for _ in range(2 * self.layers)]
        self.graphs: dict[int, DecodeGraph] = {}

    def views(
        self, first: int, batch: int
    ) -> tuple[dict[str, DeviceArray], dict[str, DeviceArray]]:
        """The cache rows of slots ``first .. first + batch - 1``, as pasts and presents."""
        rows = [array.rows(first, first + batch) for array in self.cache]
        return (dict(zip(decoder.past_names(self.layers), rows, strict=True)),
                dict(zip(decoder.present_names(self.layers), rows, strict=True)))  # fmt: skip

    def capture(self, batches: Sequence[int]) -> None:
        """Capture the decode run of each batch size (on the thread that will replay them;
        before any sequence holds a slot: a capture writes position 0 of its rows)."""
        started = time.perf_counter()
        for batch in batches:
            inputs = {
                decoder.EMBEDS: self.bound.allocate((batch, 1, self.hidden), "FP32"),
                decoder.POSITIONS: self.bound.allocate((3, batch, 1), "INT64"),
                decoder.SEQLENS: self.bound.allocate((batch,), "INT32"),
                decoder.LOGITS_INDEX: self.bound.allocate((batch,), "INT64"),
            }
            for array in inputs.values():
                array.write(np.zeros(array.shape, _numpy(array.datatype)))
            outputs: dict[str, DeviceArray] = {
                decoder.TOP_LOGITS: self.bound.allocate((batch, decoder.TOP_K), "FP32"),
                decoder.TOP_IDS: self.bound.allocate((batch, decoder.TOP_K), "INT64"),
            }
            pasts, presents = self.views(0, batch)
            logits = self.bound.allocate((batch, self.vocab), "FP32")
            graph = self.bound.capture({**inputs, **pasts},
                                       {decoder.LOGITS: logits, **outputs, **presents})  # fmt: skip
            self.graphs[batch] = DecodeGraph(batch, inputs, {decoder.LOGITS: logits, **outputs},
                                             graph)  # fmt: skip
        kind = "CUDA graphs" if self.bound.graphs else "bound runs"
        log.info("decode %s captured at batch %s (%.0f ms)", kind,
                 ", ".join(map(str, batches)), (time.perf_counter() - started) * 1000)  # fmt: skip

    def prefill(self, first: int, embeds: np.ndarray, positions: np.ndarray,
                lengths: Sequence[int], past: int = 0) -> StepOut:  # fmt: skip
        """Run prompt chunks: ``embeds`` FP32 [batch, seq, hidden] (each row's ``lengths[b]``
        tokens first, then padding), ``positions`` INT64 [3, batch, seq], into slots
        ``first ..``; ``past`` tokens already in the cache (a continued prompt: batch 1)."""
        batch = len(lengths)
        lens = np.asarray(lengths, np.int64)
        pasts, presents = self.views(first, batch)
        feeds: dict[str, np.ndarray | DeviceArray] = {
            decoder.EMBEDS: embeds,
            decoder.POSITIONS: positions,
            decoder.SEQLENS: (lens + past - 1).astype(np.int32),
            decoder.LOGITS_INDEX: lens - 1,
            **pasts,
        }
        wanted: dict[str, DeviceArray | None] = {decoder.LOGITS: None, decoder.TOP_LOGITS: None,
                                                 decoder.TOP_IDS: None, **presents}  # fmt: skip
        found = self.bound.run(feeds, wanted)
        return StepOut(found[decoder.TOP_LOGITS].read(), found[decoder.TOP_IDS].read(),
                       found[decoder.LOGITS].read)  # fmt: skip

    def decode_batch(self, rows: int) -> int:
        """The captured batch a step over slots ``0 .. rows - 1`` runs in."""
        return min(b for b in self.graphs if b >= rows)

    def decode(self, embeds: np.ndarray, positions: np.ndarray, seqlens: np.ndarray) -> StepOut:
        """One decode step of a captured batch: ``embeds`` FP32 [batch, 1, hidden],
        ``positions`` INT64 [3, batch, 1], ``seqlens`` INT32 [batch] (each row's cache
        length before its token)."""
        run = self.graphs[len(seqlens)]
        run.inputs[decoder.EMBEDS].write(embeds)
        run.inputs[decoder.POSITIONS].write(positions)
        run.inputs[decoder.SEQLENS].write(seqlens)
        run.graph.replay()
        outputs = run.outputs
        return StepOut(outputs[decoder.TOP_LOGITS].read(), outputs[decoder.TOP_IDS].read(),
                       outputs[decoder.LOGITS].read)  # fmt: skip


def _numpy(datatype: str) -> type:
    return {"FP32": np.float32, "INT64": np.int64, "INT32": np.int32}[datatype]
