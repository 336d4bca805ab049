"""The served interface, Triton's LLM conventions (TensorRT-LLM / vLLM back ends, the
``generate`` extension), so existing clients fit:

| input | datatype | shape | |
| --- | --- | --- | --- |
| text_input | BYTES | [1] | the question (UTF-8): one user turn, its pictures first |
| messages | BYTES | [1] | or a conversation (UTF-8 JSON, :mod:`.conversation`); one of the two |
| image | BYTES | [N] | 0..max_images encoded pictures, optional |
| max_tokens | INT32 | [1] | optional |
| temperature, top_p | FP32 | [1] | optional |
| top_k, seed | INT32 | [1] | optional |
| presence_penalty, frequency_penalty | FP32 | [1] | optional, -2..2 (:mod:`.penalties`) |
| logprobs | INT32 | [1] | optional: 0..20 alternatives per token (:mod:`.logprobs`) |
| stop | BYTES | [0..4] | optional stop strings (UTF-8, not empty) |
| stream | BOOL | [1] | optional; ModelStreamInfer streams whatever it says |

| output | datatype | shape | |
| --- | --- | --- | --- |
| text_output | BYTES | [1] | the whole answer (ModelInfer) or one token's text (stream) |
| output_ids | INT32 | [n] | the generated ids (the stop id included when one ended it) |
| finish_reason | BYTES | [1] | ``stop`` or ``length`` on the last response, ``""`` before |
| num_input_tokens | INT32 | [1] | the prompt's tokens, the pictures' tokens included |
| output_logprobs | BYTES | [n] | with ``logprobs``: one JSON object per id (:mod:`.logprobs`) |

Text, stop strings and finish reasons follow :mod:`.text`'s rules. Request-level
``parameters`` naming an input are that input (:mod:`mmaas.server.parameters`).

Names, datatypes and shapes are checked by the request path against the signature (the
spec part's, :mod:`mmaas.pipelines.qwen2_vl.spec`, recorded in the manifest); this module
reads the values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.conversation import (
    Conversation,
    one_turn,
    read_messages,
    unicode_text,
)
from mmaas.pipelines.qwen2_vl.runtime.sampling import SamplingParams


@dataclass(frozen=True)
class GenerationRequest:
    """One request's values: the text (or the ``messages`` conversation), the encoded
    images, the sampling fields given (``max_tokens`` None = the default, decided once the
    prompt's length is known), the stop strings, the logprobs wish (None = none)."""

    text: str
    images: tuple[bytes, ...]
    max_tokens: int | None
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    stop: tuple[str, ...] = ()
    messages: Conversation | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: int | None = None

    @property
    def conversation(self) -> Conversation:
        """The ``messages`` conversation, or the text as one user turn after its pictures."""
        return self.messages or one_turn(self.text, len(self.images))

    def sampling(self, default_max_tokens: int) -> SamplingParams:
        """Checked SamplingParams (InputError naming the parameter and its range)."""
        max_tokens = default_max_tokens if self.max_tokens is None else self.max_tokens
        return SamplingParams(
            max_tokens, self.temperature, self.top_p, self.top_k, self.seed,
            self.presence_penalty, self.frequency_penalty, self.logprobs,
        ).check()  # fmt: skip


def read_request(inputs: Mapping[str, np.ndarray]) -> GenerationRequest:
    """The values of checked inputs (object arrays of ``bytes`` for BYTES).

    Raises:
        InputError: neither or both of text_input and messages, text_input or a stop
            string not UTF-8, a stop string empty, messages malformed, or an image element
            not bytes.
    """
    if ("text_input" in inputs) == ("messages" in inputs):
        raise InputError(
            "input 'text_input': send the question as text_input or the conversation as "
            "messages (one of the two)"
        )
    messages = read_messages(inputs["messages"].reshape(-1)[0]) if "messages" in inputs else None
    text = _text("input 'text_input'", inputs["text_input"].reshape(-1)[0]) if not messages else ""
    stop = tuple(
        _text(f"input 'stop' element {index}", value)
        for index, value in enumerate(inputs["stop"].reshape(-1) if "stop" in inputs else ())
    )
    if "" in stop:
        raise InputError(
            f"input 'stop' element {stop.index('')}: an empty stop string would end every "
            "answer at once; leave it out"
        )
    images = tuple(inputs["image"].reshape(-1)) if "image" in inputs else ()
    for index, data in enumerate(images):
        if not isinstance(data, bytes):
            raise InputError(f"input 'image' element {index}: expected encoded image bytes")

    def scalar(name: str) -> float | int | None:
        array = inputs.get(name)
        return None if array is None else array.reshape(-1)[0].item()

    temperature, top_p = scalar("temperature"), scalar("top_p")
    top_k, max_tokens, seed = scalar("top_k"), scalar("max_tokens"), scalar("seed")
    presence, frequency, logprobs = (
        scalar("presence_penalty"), scalar("frequency_penalty"), scalar("logprobs"),
    )  # fmt: skip
    return GenerationRequest(
        text=text,
        images=images,
        max_tokens=None if max_tokens is None else int(max_tokens),
        temperature=0.0 if temperature is None else float(temperature),
        top_p=1.0 if top_p is None else float(top_p),
        top_k=0 if top_k is None else int(top_k),
        seed=None if seed is None else int(seed),
        stop=stop,
        messages=messages,
        presence_penalty=0.0 if presence is None else float(presence),
        frequency_penalty=0.0 if frequency is None else float(frequency),
        logprobs=None if logprobs is None else int(logprobs),
    )


def _text(where: str, raw: object) -> str:
    """A BYTES element as UTF-8 text (InputError naming ``where`` otherwise)."""
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else unicode_text(where, str(raw))
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def token_outputs(
    text: str, ids: list[int], finish_reason: str | None, prompt_tokens: int,
    logprobs: Sequence[bytes] = (),
) -> dict[str, np.ndarray]:  # fmt: skip
    """Every output of an answer or of one token: text_output BYTES [1], output_ids INT32
    [n], finish_reason BYTES [1] (``b""`` while not finished), num_input_tokens INT32 [1],
    output_logprobs BYTES [n] (empty unless asked)."""
    return {
        "text_output": np.array([text.encode("utf-8")], dtype=object),
        "output_ids": np.array(ids, dtype=np.int32),
        "finish_reason": np.array([(finish_reason or "").encode()], dtype=object),
        "num_input_tokens": np.array([prompt_tokens], dtype=np.int32),
        "output_logprobs": np.array(list(logprobs), dtype=object),
    }
