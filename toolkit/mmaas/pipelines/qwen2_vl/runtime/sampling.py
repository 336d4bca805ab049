"""Sampling parameters (C30) and the next-token choice, in transformers' order.

Rules (what ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``seed`` accept; each
violation is INVALID_ARGUMENT naming the parameter, its value and the range):

| parameter | range | "off" / default |
| --- | --- | --- |
| max_tokens | 1 .. context - prompt | absent: min(context - prompt, 512) |
| temperature | finite, >= 0 | 0 = greedy (= transformers ``do_sample=False``); absent: 0 |
| top_p | 0 < top_p <= 1 | 1 = off; absent: 1 |
| top_k | 0 .. 2^31-1 | 0 = off (k >= vocabulary is off too); absent: 0 |
| seed | 0 .. 2^31-1 | absent: fresh entropy per request |
| presence_penalty, frequency_penalty | -2 .. 2 | 0 = off (:mod:`.penalties`) |
| logprobs | 0 .. 20 | absent: none; else the alternatives per token (:mod:`.logprobs`) |

The checkpoint's ``repetition_penalty`` (generation_config.json) applies in every mode,
greedy included, as ``generate`` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.logprobs import (
    MAX_TOP_LOGPROBS,
    TokenLogprobs,
    token_logprobs,
)
from mmaas.pipelines.qwen2_vl.runtime.penalties import GeneratedPenalties

INT32_MAX = 2**31 - 1
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class SamplingParams:
    """Validated sampling parameters (see the module docstring)."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        """Temperature 0: the first highest score (torch.argmax's choice)."""
        return self.temperature == 0

    def check(self) -> SamplingParams:
        """Return self when every value is in range.

        Raises:
            InputError: naming the parameter, its value and the rule.
        """
        rules = [
            ("max_tokens", self.max_tokens, 1 <= self.max_tokens <= INT32_MAX, "1 <= max_tokens"),
            ("temperature", self.temperature,
             math.isfinite(self.temperature) and self.temperature >= 0,
             "a finite number >= 0; 0 = greedy"),
            ("top_p", self.top_p, math.isfinite(self.top_p) and 0 < self.top_p <= 1,
             "0 < top_p <= 1; 1 = off"),
            ("top_k", self.top_k, 0 <= self.top_k <= INT32_MAX, "0 <= top_k <= 2^31-1; 0 = off"),
            ("seed", self.seed, self.seed is None or 0 <= self.seed <= INT32_MAX,
             "0 <= seed <= 2^31-1; leave it out for a fresh seed"),
            *[(name, value, math.isfinite(value) and -2 <= value <= 2, "-2 <= value <= 2; 0 = off")
              for name, value in (("presence_penalty", self.presence_penalty),
                                  ("frequency_penalty", self.frequency_penalty))],
            ("logprobs", self.logprobs,
             self.logprobs is None or 0 <= self.logprobs <= MAX_TOP_LOGPROBS,
             f"0 <= logprobs <= {MAX_TOP_LOGPROBS}: the alternatives per token"),
        ]  # fmt: skip
        for name, value, ok, rule in rules:
            if not ok:
                raise InputError(f"input {name!r}: {value!r} is out of range ({rule})")
        return self


class Sampler:
    """Next-token choice for one request: repetition penalty (a logits processor, also under
    greedy), presence and frequency penalties (:mod:`.penalties`), then for sampling
    temperature -> top_k -> top_p (logits warpers) and a draw from the softmax with the
    request's own seeded PCG64, so a seeded answer does not depend on what else runs in
    the batch. With ``logprobs`` asked, ``logprobs`` holds the last chosen token's entry
    (:mod:`.logprobs`: from the raw logits)."""

    def __init__(
        self, params: SamplingParams, penalty: float, vocab: int, prompt_ids: np.ndarray
    ) -> None:
        self.params = params
        self.penalty = np.float32(penalty)
        self.seen = np.zeros(vocab, bool)
        self.seen[prompt_ids] = True
        self.rng = np.random.Generator(np.random.PCG64(params.seed))
        self.generated = GeneratedPenalties(
            params.presence_penalty, params.frequency_penalty, vocab
        )
        self.logprobs: TokenLogprobs | None = None

    def __call__(self, logits: np.ndarray) -> int:
        """logits FP32 [V] -> the token id; records it for the penalties."""
        scores = self.generated.apply(self.penalise(logits))
        token = int(np.argmax(scores)) if self.params.greedy else self.draw(self.warp(scores))
        self.seen[token] = True
        self.generated.add(token)
        if self.params.logprobs is not None:
            self.logprobs = token_logprobs(logits, token, self.params.logprobs)
        return token

    def choose_top(self, values: np.ndarray, ids: np.ndarray) -> int | None:
        """The token ``self(logits)`` would pick, from the largest logits alone: ``values``
        FP32 [K] and their token ``ids`` (the engine's top candidates), recorded the same
        way; None when they cannot decide it (sampling, presence or frequency penalties,
        logprobs asked: these need every logit; a NaN, or no penalised candidate above the
        smallest candidate: a token outside them could tie or win). The repetition penalty
        only lowers scores, so a candidate scoring above every token outside is the
        argmax; among equal scores the lowest id wins, as ``argmax`` picks."""
        params = self.params
        if not params.greedy or self.generated.active or params.logprobs is not None:
            return None
        if np.isnan(values).any():
            return None
        scores = values
        if self.penalty != 1:
            penalised = np.where(values < 0, values * self.penalty, values / self.penalty)
            scores = np.where(self.seen[ids], penalised, values)
        best = scores.max()
        if not best > values.min():
            return None
        token = int(ids[scores == best].min())
        self.seen[token] = True
        return token

    def penalise(self, logits: np.ndarray) -> np.ndarray:
        """RepetitionPenaltyLogitsProcessor on the ids seen so far: s < 0 -> s * p, else
        s / p (float32)."""
        if self.penalty == 1:
            return logits
        penalised = np.where(logits < 0, logits * self.penalty, logits / self.penalty)
        return np.where(self.seen, penalised, logits)

    def warp(self, scores: np.ndarray) -> np.ndarray:
        """Temperature, top_k, top_p (TopPLogitsWarper: ascending stable sort, at least one
        token kept) in float64; dropped tokens get -inf."""
        p = self.params
        scores = scores.astype(np.float64) / p.temperature
        if 0 < p.top_k < len(scores):
            kth = np.partition(scores, -p.top_k)[-p.top_k]
            scores = np.where(scores < kth, -np.inf, scores)
        if p.top_p < 1:
            order = np.argsort(scores, kind="stable")
            probs = np.exp(scores[order] - scores[order[-1]])
            cumulative = np.cumsum(probs / probs.sum())
            drop = cumulative <= 1 - p.top_p
            drop[-1] = False
            scores[order[drop]] = -np.inf
        return scores

    def draw(self, scores: np.ndarray) -> int:
        """A draw from the softmax of warped scores with the request's generator."""
        probs = np.exp(scores - scores.max())
        return int(self.rng.choice(len(probs), p=probs / probs.sum()))
