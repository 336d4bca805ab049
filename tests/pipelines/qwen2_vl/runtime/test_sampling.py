"""Sampling parameters (C30): every out-of-range value is refused naming the parameter and the
range; the "off" values are accepted; the warpers equal transformers' (same kept tokens);
a seeded draw is the same twice and differs with another seed; presence and frequency
penalties are OpenAI's formula over the generated tokens only; logprobs are the log-softmax
of the raw logits (torch's), the top ones most likely first."""

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
    "presence 2.5": ({"presence_penalty": 2.5}, r"'presence_penalty': 2.5 is out of range \(-2"),
    "frequency NaN": ({"frequency_penalty": float("nan")}, "'frequency_penalty': nan is out"),
    "logprobs 21": ({"logprobs": 21}, r"'logprobs': 21 is out of range \(0 <= logprobs <= 20"),
    "logprobs -1": ({"logprobs": -1}, "'logprobs': -1 is out of range"),
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
     {"top_p": 1.0}, {"seed": 0}, {"seed": 2**31 - 1}, {"max_tokens": 2**31 - 1},
     {"presence_penalty": -2.0}, {"frequency_penalty": 2.0}, {"logprobs": 0}, {"logprobs": 20}],
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


def test_presence_and_frequency_penalties_follow_openais_formula() -> None:
    params = SamplingParams(8, presence_penalty=0.5, frequency_penalty=0.25)
    prompt = np.array([0, 1])
    sampler = Sampler(params, 1.0, 4, prompt)
    logits = np.array([3.0, 2.9, 2.8, 1.0], np.float32)
    assert sampler(logits) == 0  # nothing generated yet: the prompt's tokens are not penalised
    assert sampler(logits) == 1  # 3.0 - 0.25 - 0.5 = 2.25 < 2.9
    assert sampler(logits) == 2  # 2.9 - 0.75 = 2.15 < 2.8
    counts = np.array([1, 1, 1, 0], np.float32)
    want = logits - counts * 0.25 - (counts > 0) * 0.5
    assert np.array_equal(sampler.generated.apply(logits), want.astype(np.float32))
    off = Sampler(SamplingParams(8), 1.0, 4, prompt)
    assert [off(logits) for _ in range(3)] == [0, 0, 0]


def test_logprobs_are_the_raw_log_softmax_and_the_top_ones_come_first() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=50).astype(np.float32)
    logits[7] = logits[9] = logits.max() + 1  # a tie: the lower id first
    params = SamplingParams(8, temperature=0.7, top_k=3, logprobs=5, frequency_penalty=1.0)
    sampler = Sampler(params, 1.05, 50, np.array([7]))
    token = sampler(logits)
    want = torch.log_softmax(torch.tensor(logits, dtype=torch.float64), -1).numpy()
    entry = sampler.logprobs
    assert entry is not None and entry.token == token
    assert entry.logprob == pytest.approx(want[token], abs=1e-12)
    assert [i for i, _ in entry.top] == [7, 9, *np.argsort(-want, kind="stable")[2:5].tolist()]
    assert [v for _, v in entry.top] == pytest.approx(sorted(want, reverse=True)[:5], abs=1e-12)
    assert Sampler(SamplingParams(8), 1.0, 50, np.array([7])).logprobs is None
