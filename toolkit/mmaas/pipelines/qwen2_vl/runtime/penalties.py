"""OpenAI's presence and frequency penalties (``presence_penalty``, ``frequency_penalty``,
each -2..2, 0 = off), as OpenAI defines them and vLLM applies them: over the tokens
generated so far (never the prompt's), with ``c[j]`` the times token ``j`` was generated::

    logits[j] -= c[j] * frequency_penalty + (c[j] > 0) * presence_penalty

applied after the checkpoint's repetition penalty and before temperature, top-k and top-p,
in every mode (greedy included).
"""

from __future__ import annotations

import numpy as np


class GeneratedPenalties:
    """One request's generated-token counts and its two penalties (see the module
    docstring); ``vocab`` = the logits' width."""

    def __init__(self, presence: float, frequency: float, vocab: int) -> None:
        self.presence, self.frequency = np.float32(presence), np.float32(frequency)
        self.active = presence != 0 or frequency != 0
        self.counts = np.zeros(vocab, np.float32) if self.active else np.zeros(0, np.float32)

    def apply(self, scores: np.ndarray) -> np.ndarray:
        """scores FP32 [V] -> the penalised scores (the same array when both are 0)."""
        if not self.active:
            return scores
        generated = (self.counts > 0).astype(np.float32)
        return scores - self.counts * self.frequency - generated * self.presence

    def add(self, token: int) -> None:
        """Count a generated token."""
        if self.active:
            self.counts[token] += 1
