"""One request's generation, equal to transformers'
``Qwen2VLForConditionalGeneration.generate``, in three parts (the runs themselves are the
scheduler's, :mod:`.scheduler`, over :mod:`.language`):

    prepare (caller's thread; every user error raised here, before any engine work):
        each picture's cached embeddings, or its decoding and preprocessing; the prompt
        ids; context and sampling checks
    admit (engine thread): the vision engine for the pictures not cached, their
        embeddings placed at the image tokens of ``embed_tokens[ids]``, the M-RoPE
        positions; the sequence then holds its prompt until the scheduler has prefilled it
    emit (engine thread): each chosen token's event: its text, stop ids, max_tokens

Engines are the back end's loaded ``Engine`` objects.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.pipelines.qwen2_vl.runtime.embeddings import ImageEmbeddings, Picture, content_key
from mmaas.pipelines.qwen2_vl.runtime.images import ImagePreprocessor, decode_image
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.logprobs import TokenLogprobs
from mmaas.pipelines.qwen2_vl.runtime.prompt import PromptBuilder, rope_index
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest
from mmaas.pipelines.qwen2_vl.runtime.sampling import DEFAULT_MAX_TOKENS, Sampler, SamplingParams


@dataclass(frozen=True)
class Prepared:
    """A checked request: prompt ids INT64 [L], its pictures (cached embeddings or pixels
    to encode), the sampling parameters."""

    ids: np.ndarray
    pictures: tuple[Picture, ...]
    sampling: SamplingParams


@dataclass
class TokenEvent:
    """One generated token: its id, the text it completes ('' while a multi-byte character
    is incomplete or for special tokens), and on the last one why it ended."""

    token_id: int
    text: str
    finish_reason: str | None = None  # "stop" (a stop id, included) | "length" (max_tokens)
    logprobs: TokenLogprobs | None = None  # when the request asked for them


@dataclass
class Sequence:
    """One request in flight. ``embeds`` FP32 [L, hidden] and ``positions`` INT64 [3, L] are
    its prompt (dropped once prefilled); ``prefilled`` prompt tokens are in its cache;
    ``length`` tokens are in the cache before ``pending``, the token its next decode step
    feeds, at position ``length + delta`` on every M-RoPE axis."""

    sampler: Sampler
    max_tokens: int
    embeds: np.ndarray | None
    positions: np.ndarray | None
    delta: int
    stream: DecodeStream
    prompt: int
    prefilled: int = 0
    length: int = 0
    pending: int = -1
    generated: list[int] = field(default_factory=list)


class Generator:
    """Validation and preprocessing, a request's prompt, and its tokens' events."""

    def __init__(self, config: RuntimeConfig, limits: Limits, tokenizer: Tokenizer,
                 embed: np.ndarray, vision: Any, image_cache: int = 0,
                 vision_buckets: Seq[int] = ()) -> None:  # fmt: skip
        self.config, self.limits = config, limits
        self.tokenizer, self.embed = tokenizer, embed  # embed: FP32 [V, H], memory-mapped
        merge = config.image.merge_size
        self.pictures = ImageEmbeddings(vision, merge, limits.max_images, vision_buckets,
                                        image_cache)  # fmt: skip
        self.images = ImagePreprocessor(config.image)
        self.prompts = PromptBuilder(tokenizer, config.prompt, config.tokens, merge)
        self.image_token = config.tokens.image
        self.stop = config.stop_ids

    def prepare(self, request: GenerationRequest) -> Prepared:
        """Check and preprocess one request (no engine work).

        Raises:
            InputError: a bad image (decode, pixel budget, aspect), too many images or
                patches for the vision profile, a reserved token in the text, a prompt over
                the context (with its text and image token counts), bad sampling values,
                prompt + max_tokens over the context.
        """
        limits = self.limits
        if len(request.images) > limits.max_images:
            raise InputError(
                f"input 'image': {len(request.images)} images; the vision engine's profile "
                f"takes at most {limits.max_images} per request"
            )
        pictures = [self.picture(data, index) for index, data in enumerate(request.images)]
        grids = [p.grid for p in pictures]
        total = sum(t * h * w for t, h, w in grids)
        if total > limits.max_patches:
            raise InputError(
                f"input 'image': the images need {total} patches after resizing "
                f"({', '.join(f'{h}x{w}' for _, h, w in grids)}); the vision engine's profile "
                f"takes at most {limits.max_patches} per request"
            )
        ids = self.prompts(request.conversation, grids)
        image_tokens = total // self.config.image.merge_size**2
        counts = f"{len(ids) - image_tokens} text + {image_tokens} image tokens"
        if len(ids) >= limits.context:
            raise InputError(
                f"input 'text_input': the prompt is {len(ids)} tokens ({counts}); the context "
                f"limit is {limits.context} tokens, prompt and at least 1 generated token"
            )
        room = limits.context - len(ids)
        sampling = request.sampling(min(room, DEFAULT_MAX_TOKENS))
        if sampling.max_tokens > room:
            raise InputError(
                f"input 'max_tokens': {sampling.max_tokens} + the prompt's {len(ids)} tokens "
                f"({counts}) exceed the context limit of {limits.context}; at most {room}"
            )
        return Prepared(ids, tuple(pictures), sampling)

    def picture(self, data: bytes, index: int) -> Picture:
        """A picture's cached embeddings, or its decoded and preprocessed pixels."""
        key = content_key(data)
        cached = self.pictures.cached(key)
        if cached is not None:
            return Picture(key, cached[0], embeds=cached[1])
        pixels, grid = self.images(decode_image(data, index, self.limits.max_input_pixels))
        return Picture(key, grid, pixels=np.ascontiguousarray(pixels))

    def admit(self, prepared: Prepared) -> Sequence:
        """The sequence of a prepared request: the vision engine for its pictures not
        cached, its prompt's embeddings and M-RoPE positions (engine thread)."""
        ids = prepared.ids
        embeds = np.array(self.embed[ids], np.float32)  # [L, H]: a copy of the rows
        if prepared.pictures:
            self.pictures.fill(prepared.pictures)
            embeds[ids == self.image_token] = np.concatenate([p.embeds for p in prepared.pictures])
        grids = [p.grid for p in prepared.pictures]
        positions, delta = rope_index(ids, grids, self.image_token, self.config.image.merge_size)
        penalty = self.config.generation.repetition_penalty
        sampler = Sampler(prepared.sampling, penalty, self.config.language.vocab_size, ids)
        stream = DecodeStream(skip_special_tokens=True)
        return Sequence(sampler, prepared.sampling.max_tokens, embeds, positions, delta, stream,
                        len(ids))  # fmt: skip

    def emit(self, seq: Sequence, token: int) -> TokenEvent:
        """Record a chosen token; the event says whether the sequence is finished (an id
        past the tokenizer's vocabulary, a model's padded rows, has no text)."""
        seq.generated.append(token)
        piece = seq.stream.step(self.tokenizer, token) or ""
        reason = None
        if token in self.stop:
            reason = "stop"
        elif len(seq.generated) >= seq.max_tokens:
            reason = "length"
        return TokenEvent(token, piece, reason, seq.sampler.logprobs)

    def text(self, ids: list[int]) -> str:
        """The whole answer's text (``decode(skip_special_tokens=True)``, as transformers'
        batch_decode in Qwen2-VL's examples)."""
        text: str = self.tokenizer.decode(ids, skip_special_tokens=True)
        return text
