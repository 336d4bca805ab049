"""The answer's text as a client receives it, token by token: stop strings and the last bytes.

Rules (the same for every interface: ModelInfer, ModelStreamInfer, ``/generate``,
``/generate_stream`` and the OpenAI chat endpoint):

* **Joined stream = unary text.** Each response carries the text its token completes. A
  multi-byte character split across tokens is sent once complete; when generation ends
  (a stop id or ``max_tokens``) inside one, the last response carries what the whole
  answer's ``decode(output_ids, skip_special_tokens=True)`` has beyond the text already
  sent (U+FFFD for the incomplete bytes), so the responses joined equal the unary
  ``text_output``, which equals the tokenizer's decode of ``output_ids``.
* **Stop strings** (``stop``: up to 4 non-empty strings, OpenAI's limit): generation ends
  at the first place where one of them appears in the answer's text; the text ends just
  before it (the stop string itself is never sent), ``finish_reason`` is ``stop``, and
  ``output_ids`` end with the token that completed it. While streaming, text that could
  be the start of a stop string is held back until it is known not to be (so no
  character of a stop string is ever sent, and no text before one is lost). The unary
  text is then ``decode(output_ids)`` cut before the stop string.
* **finish_reason**: ``stop`` (a stop id, included in ``output_ids``, or a stop string),
  ``length`` (``max_tokens`` reached), on the last response only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mmaas.pipelines.qwen2_vl.runtime.generation import TokenEvent


@dataclass
class TextStream:
    """One request's text state. ``decode``: ids -> text (the tokenizer's
    ``decode(ids, skip_special_tokens=True)``); ``stops``: the request's stop strings."""

    decode: Callable[[list[int]], str]
    stops: Sequence[str] = ()
    ids: list[int] = field(default_factory=list)
    text: str = ""  # the answer's text so far (the incremental pieces joined)
    sent: int = 0  # characters of ``text`` already handed out

    def push(self, event: TokenEvent) -> tuple[str, str | None]:
        """Take one generated token -> (the text to send with it, its finish reason or
        None). After a non-None reason the request is over: push nothing more."""
        self.ids.append(event.token_id)
        self.text += event.text
        if event.finish_reason is not None:
            whole = self.decode(self.ids)  # flushes bytes of an incomplete character
            if whole.startswith(self.text[: self.sent]):
                self.text = whole
        cut = self._stop_at()
        if cut is not None:
            return self._take(cut), "stop"
        if event.finish_reason is not None:
            return self._take(len(self.text)), event.finish_reason
        return self._take(len(self.text) - self._held()), None

    def _stop_at(self) -> int | None:
        """Where the earliest stop string begins in the text not yet sent, or None."""
        found = [self.text.find(stop, self.sent) for stop in self.stops]
        found = [at for at in found if at >= 0]
        return min(found) if found else None

    def _held(self) -> int:
        """Characters at the end of the unsent text that begin some stop string."""
        tail = self.text[self.sent :]
        longest = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(tail)), longest, -1):
                if tail.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _take(self, end: int) -> str:
        """The unsent text up to ``end``, marked sent."""
        piece = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return piece
