"""The KV cache: one array per layer and kind, [rows, kv_heads, capacity, head_dim], allocated
once where the language engine computes (GPU memory; host memory on a CPU engine), in slots:
a sequence owns one row from its admission to its end and its keys and values are written in
place by each run (:mod:`mmaas.core.decoder`).

Sizing (logged at start): a slot holds ``capacity`` tokens of every layer,
``2 x layers x kv_heads x capacity x head_dim x element`` bytes. The budget is
``kv_cache_memory`` (a fraction) of the memory free where the cache lives, measured after the
engines are loaded; it holds ``max_sequences`` sequences or as many as fit, and requests
beyond them wait for a slot. The rows are the smallest decode batch that holds them (decode
batches are padded to a captured size): rows past the sequences are never given out.
A start whose budget holds no slot fails with the figures.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from mmaas.core.errors import IntegrityError

GB = 1e9


@dataclass(frozen=True)
class CacheSize:
    """The cache's shape and the figures it was sized from (bytes)."""

    rows: int  # allocated rows (the largest decode batch)
    sequences: int  # rows given out (max_sequences, or fewer when the budget is short)
    capacity: int  # tokens per row
    slot_bytes: int
    budget_bytes: int
    free_bytes: int

    def describe(self) -> str:
        """One log line: slots, tokens, bytes, budget."""
        return (
            f"KV cache: {self.sequences} sequences in {self.rows} slots x {self.capacity} "
            f"tokens ({self.slot_bytes / GB:.3f} GB a slot, {self.rows * self.slot_bytes / GB:.2f}"
            f" GB) of a budget of {self.budget_bytes / GB:.2f} GB "
            f"({self.budget_bytes / max(self.free_bytes, 1):.2f} of {self.free_bytes / GB:.1f} "
            "GB free)"
        )


def size_cache(
    slot_bytes: int, capacity: int, batches: list[int], max_sequences: int,
    free_bytes: int, fraction: float,
) -> CacheSize:  # fmt: skip
    """The cache for ``max_sequences`` sequences, the decode ``batches`` (ascending) and a
    budget of ``fraction`` x ``free_bytes``: ``min(max_sequences, slots the budget holds)``
    sequences in rows = the smallest batch that holds them (or, when those rows pass the
    budget, the largest batch that fits, for both).

    Raises:
        IntegrityError: the budget holds no slot (names the figures and the setting).
    """
    budget = int(free_bytes * fraction)
    fits = budget // slot_bytes
    if fits < 1:
        raise IntegrityError(
            f"the KV cache budget ({fraction} x {free_bytes / GB:.2f} GB free = "
            f"{budget / GB:.3f} GB) holds no sequence of {capacity} tokens "
            f"({slot_bytes / GB:.3f} GB); raise pipeline.settings.kv_cache_memory or "
            "shorten the context"
        )
    sequences = min(max_sequences, fits)
    rows = min((b for b in batches if b >= sequences), default=sequences)
    if rows > fits:  # the padded batch does not fit: the largest batch that does
        rows = sequences = max((b for b in batches if b <= fits), default=1)
    return CacheSize(rows, sequences, capacity, slot_bytes, budget, free_bytes)


class Slots:
    """The free rows, given out lowest first (so the decode batch stays short)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.free = list(range(count))

    def take(self) -> int | None:
        """The lowest free slot, or None when every one is taken."""
        return heapq.heappop(self.free) if self.free else None

    def give_back(self, slot: int) -> None:
        """Free a slot."""
        heapq.heappush(self.free, slot)

    @property
    def used(self) -> int:
        """Slots taken."""
        return self.count - len(self.free)
