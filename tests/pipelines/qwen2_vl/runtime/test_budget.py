"""The bound on decoded pictures in flight: costs come from the headers (width x height x
8), requests beyond the bound wait for room in arrival order, one over it alone is refused
naming the setting."""

from __future__ import annotations

import asyncio

import pytest
from PIL import Image

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget, decode_cost

from .conftest import encode


def test_the_cost_is_read_from_the_headers() -> None:
    picture = encode(Image.new("RGB", (100, 30)))
    assert decode_cost([picture, picture, b"not a picture"]) == 2 * 100 * 30 * 8


def test_requests_beyond_the_bound_wait_and_one_over_it_is_refused() -> None:
    picture = encode(Image.new("RGB", (100, 100)))  # 80000 bytes
    budget = DecodeBudget(200_000)  # two at a time
    events: list[str] = []

    async def one(name: str) -> None:
        async with budget.hold([picture]):
            events.append(f"{name}+{budget.used}")
            await asyncio.sleep(0.05)
        events.append(f"{name}-")

    async def three() -> None:
        await asyncio.gather(one("a"), one("b"), one("c"))

    asyncio.run(three())
    assert events[:2] == ["a+80000", "b+160000"]  # c waited for room
    entered = next(i for i, event in enumerate(events) if event.startswith("c+"))
    assert entered > events.index("a-") and events[entered] in ("c+80000", "c+160000")
    assert budget.used == 0

    async def too_big() -> None:
        async with DecodeBudget(1000).hold([picture]):
            pass

    with pytest.raises(InputError, match=r"80000 bytes decoded .*MMAAS_MAX_DECODE_BYTES"):
        asyncio.run(too_big())
