"""The KV cache's sizing from a memory budget (slots, rows, the refusal naming the figures),
the slots given out lowest first, and the decode batch sizes captured (C43: between two
captured sizes the batch is padded to the next)."""

from __future__ import annotations

import pytest

from mmaas.core.errors import IntegrityError
from mmaas.pipelines.qwen2_vl.runtime.kvcache import Slots, size_cache
from mmaas.pipelines.qwen2_vl.runtime.language import decode_batches

GB = 10**9


@pytest.mark.parametrize(
    ("limit", "graphs", "ceiling", "want"),
    [
        (3, True, 4, [1, 2, 4]),
        (50, True, 64, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56]),
        (64, True, 64, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),
        (50, True, 50, [1, 2, 4, 8, 16, 24, 32, 40, 48, 50]),  # the profile caps the padding
        (1, True, 64, [1]),
        (3, False, 4, [1, 2, 3]),
    ],
)
def test_the_decode_batches_captured(limit, graphs, ceiling, want) -> None:
    assert decode_batches(limit, graphs, ceiling) == want


def test_the_cache_holds_what_the_budget_allows() -> None:
    slot = GB // 10  # 0.1 GB a sequence
    batches = [1, 2, 4, 8, 16, 24]
    full = size_cache(slot, 4096, batches, 20, free_bytes=100 * GB, fraction=0.5)
    assert (full.sequences, full.rows) == (20, 24)  # 20 sequences, padded rows up to 24
    short = size_cache(slot, 4096, batches, 20, free_bytes=2 * GB, fraction=0.5)
    assert (short.sequences, short.rows) == (8, 8)  # 1 GB holds 10: the largest batch under
    assert "8 sequences in 8 slots x 4096 tokens" in short.describe()


def test_a_budget_that_holds_no_sequence_is_refused_with_the_figures() -> None:
    with pytest.raises(
        IntegrityError,
        match=r"budget \(0.1 x 1.00 GB free = 0.100 GB\) holds "
        r"no sequence of 4096 tokens \(0.117 GB\); raise pipeline.settings",
    ):
        size_cache(117_440_512, 4096, [1], 4, free_bytes=GB, fraction=0.1)


def test_slots_are_given_out_lowest_first() -> None:
    slots = Slots(3)
    assert [slots.take(), slots.take()] == [0, 1]
    slots.give_back(0)
    assert [slots.take(), slots.take(), slots.take()] == [0, 2, None]
    assert slots.used == 3
