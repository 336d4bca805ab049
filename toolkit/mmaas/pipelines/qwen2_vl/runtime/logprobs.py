"""Log-probabilities of the generated tokens (OpenAI's ``logprobs`` / ``top_logprobs``; the
``logprobs`` input of the generation interface: 0..20 alternatives per token).

**The rule** (vLLM's default, ``raw_logprobs``; OpenAI reports the model's distribution):
each token's ``logprob`` is the log-softmax, in float64, of the raw model logits of its
step, the logits the sampler starts from, before the repetition, presence and frequency
penalties, temperature, top-k and top-p. So the values do not depend on the sampling
settings, and under greedy decoding with no penalty the chosen token is the top one.
``top_logprobs`` are the ``k`` most likely tokens of the same distribution, most likely
first (equal values: the lower id first); the chosen token may or may not be among them.

**The output** ``output_logprobs`` (BYTES [n], one element per generated id, the stop id
included) holds each token's entry as OpenAI's JSON object, UTF-8::

    {"token": "Hello", "logprob": -0.31, "bytes": [72, 101, 108, 108, 111],
     "top_logprobs": [{"token": "Hello", "logprob": -0.31, "bytes": [...]}, ...]}

``bytes`` are the token's own bytes (a byte-level BPE token may hold part of a UTF-8
character); ``token`` is those bytes as text, each byte that is not part of a whole
UTF-8 character written ``\\xNN``; a special token (``<|im_end|>``) is its text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import orjson

MAX_TOP_LOGPROBS = 20  # OpenAI's limit


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token's log-probability and its step's ``top`` (id, logprob) pairs."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]


def token_logprobs(logits: np.ndarray, token: int, top: int) -> TokenLogprobs:
    """The entry of ``token`` chosen from ``logits`` FP32 [V] (raw), with ``top``
    alternatives (see the module docstring)."""
    scores = logits.astype(np.float64)
    shifted = scores - scores.max()
    logp = shifted - np.log(np.exp(shifted).sum())
    best: list[tuple[int, float]] = []
    if top:
        candidates = np.argpartition(-logp, top - 1)[:top] if top < len(logp) else range(len(logp))
        order = sorted((int(i) for i in candidates), key=lambda i: (-logp[i], i))
        best = [(i, float(logp[i])) for i in order]
    return TokenLogprobs(token, float(logp[token]), tuple(best))


class LogprobText:
    """Entries -> OpenAI's JSON (the module docstring), with each id's bytes and text read
    once from the tokenizer (a ``tokenizers.Tokenizer`` with a byte-level model)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
        self.describe = lru_cache(maxsize=65536)(self._describe)

    def __call__(self, entry: TokenLogprobs) -> bytes:
        """One entry as UTF-8 JSON."""
        document = {**self._one(entry.token, entry.logprob),
                    "top_logprobs": [self._one(i, value) for i, value in entry.top]}  # fmt: skip
        return orjson.dumps(document)

    def _one(self, token: int, logprob: float) -> dict[str, Any]:
        text, raw = self.describe(token)
        return {"token": text, "logprob": logprob, "bytes": raw}

    def _describe(self, token: int) -> tuple[str, list[int]]:
        """(text, bytes) of one id."""
        piece = self.tokenizer.id_to_token(token)
        if piece is None:  # a padded row of the embedding table: no token at all
            return "", []
        if piece in self.special:
            raw = piece.encode()
        else:
            raw = b"".join(bytes([BYTE_OF[c]]) if c in BYTE_OF else c.encode() for c in piece)
        return raw.decode("utf-8", errors="backslashreplace"), list(raw)


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet (the ``ByteLevel`` pre-tokenizer's): each byte's
    printable stand-in character -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


BYTE_OF = _byte_level_alphabet()
