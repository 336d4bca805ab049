"""Sampling parameters (C30): every out-of-range value is refused naming the parameter and the
range; the "off" values are accepted; the warpers equal transformers' (same kept tokens);
a seeded draw is the same twice and differs with another seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.sampling import Sampler, SamplingParams

REFUSED = {
    "max_tokens 0": ({"max_tokens": 0}, "'max_tokens': 0 is out of range"),
    "max_tokens -1": ({"max_tokens": -1}, "'max_tokens': -1 is out of range"),
    "temperature -1": ({"temperature": -1.0}, r"'temperature': -1.0 is out of range \(a finite"),
    "temperature NaN": ({"temperature": float("nan")}, "'temperature': nan is out of range"),
    "temperature inf": ({"temperature": float("inf")}, "'temperature': inf is out of range"),
    "top_p 0": ({"top_p": 0.0}, r"'top_p': 0.0 is out of range \(0 < top_p <= 1"),
    "top_p 1.5": ({"top_p": 1.5}, "'top_p': 1.5 is out of range"),
    "top_k -1": ({"top_k": -1}, r"'top_k': -1 is out of range \(0 <= top_k"),
    "seed -1": ({"seed": -1}, r"'seed': -1 is out of range \(0 <= seed <= 2\^31-1"),
    "seed 2^40": ({"seed": 2**40}, "'seed': 1099511627776 is out of range"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_out_of_range_values_are_refused_naming_parameter_and_range(case: str) -> None:
    values, message = REFUSED[case]
    params = {"max_tokens": 8, **values}
    with pytest.raises(InputError, match=message):
        SamplingParams(**params).check()


@pytest.mark.parametrize(
    "values",
    [{"temperature": 0.0}, {"temperature": 1e-8}, {"top_k": 0}, {"top_k": 10**9},
     {"top_p": 1.0}, {"seed": 0}, {"seed": 2**31 - 1}, {"max_tokens": 2**31 - 1}],
    ids=str,
)  # fmt: skip
def test_boundary_and_off_values_are_accepted(values: dict) -> None:
    SamplingParams(**{"max_tokens": 8, **values}).check()


def test_warpers_keep_the_tokens_transformers_keeps() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, 512).astype(np.float32)
    prompt = rng.integers(0, 512, 40)
    sampler = Sampler(SamplingParams(8, 0.7, 0.9, 50, seed=1), 1.05, 512, prompt)
    ours = sampler.warp(sampler.penalise(logits))
    scores = torch.from_numpy(logits)[None]
    ids = torch.from_numpy(prompt)[None]
    scores = RepetitionPenaltyLogitsProcessor(1.05)(ids, scores)
    for warper in (TemperatureLogitsWarper(0.7), TopKLogitsWarper(50), TopPLogitsWarper(0.9)):
        scores = warper(ids, scores)
    assert (
        np.flatnonzero(np.isfinite(ours)).tolist()
        == torch.isfinite(scores[0]).nonzero()[:, 0].tolist()
    )


def test_greedy_takes_the_first_maximum_after_the_penalty() -> None:
    logits = np.array([1.0, 3.0, 3.0, 2.9], np.float32)
    assert Sampler(SamplingParams(4), 1.0, 4, np.array([], np.int64))(logits) == 1
    # token 1 was in the prompt: 3.0 / 1.05 < 2.9 is false, 3.0 (token 2) wins
    assert Sampler(SamplingParams(4), 1.05, 4, np.array([1]))(logits) == 2


def test_a_seeded_draw_is_reproducible() -> None:
    logits = np.random.default_rng(1).normal(0, 2, 300).astype(np.float32)

    def draws(seed: int) -> list[int]:
        sampler = Sampler(SamplingParams(8, 1.0, 0.95, 0, seed), 1.0, 300, np.array([0]))
        return [sampler(logits) for _ in range(20)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
