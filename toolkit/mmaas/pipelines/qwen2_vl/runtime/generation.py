"""One request's generation on the two engines, equal to transformers'
``Qwen2VLForConditionalGeneration.generate``:

    prepare (caller's thread; every user error raised here, before any engine work):
        decode + preprocess each image, prompt ids, context and sampling checks
    prefill (engine thread): vision engine -> image embeddings placed at the image tokens
        of ``embed_tokens[ids]``, M-RoPE positions, language runs over the prompt in
        chunks of at most the profile's sequence length
    decode (engine thread, batched across requests by :mod:`.scheduler`): one language run
        per step over the KV cache, sampling, stop ids, streamed text

Engines are the back end's loaded ``Engine`` objects (``infer(inputs, outputs)``).
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
from mmaas.pipelines.qwen2_vl.runtime.images import ImagePreprocessor, decode_image
from mmaas.pipelines.qwen2_vl.runtime.limits import Limits
from mmaas.pipelines.qwen2_vl.runtime.logprobs import TokenLogprobs
from mmaas.pipelines.qwen2_vl.runtime.prompt import PromptBuilder, rope_index
from mmaas.pipelines.qwen2_vl.runtime.request import GenerationRequest
from mmaas.pipelines.qwen2_vl.runtime.sampling import DEFAULT_MAX_TOKENS, Sampler, SamplingParams


@dataclass(frozen=True)
class Prepared:
    """A checked request: prompt ids INT64 [L], pixel_values FP32 [N, 1176] of all images,
    grid_thw INT64 [I, 3], the sampling parameters."""

    ids: np.ndarray
    pixel_values: np.ndarray
    grid_thw: np.ndarray
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
    """One request in flight: sampler, cache length, rope delta, text stream state."""

    sampler: Sampler
    max_tokens: int
    length: int  # tokens in the cache (prompt + generated before the pending token)
    delta: int  # M-RoPE rope delta
    stream: DecodeStream
    generated: list[int] = field(default_factory=list)


class Generator:
    """Validation, preprocessing, prefill and decode steps over the two engines."""

    def __init__(
        self,
        config: RuntimeConfig,
        limits: Limits,
        tokenizer: Tokenizer,
        embed: np.ndarray,
        vision: Any,
        language: Any,
    ) -> None:
        self.config, self.limits = config, limits
        self.tokenizer, self.embed = tokenizer, embed  # embed: FP32 [V, H], memory-mapped
        self.vision, self.language = vision, language
        self.images = ImagePreprocessor(config.image)
        self.prompts = PromptBuilder(
            tokenizer, config.prompt, config.tokens, config.image.merge_size
        )
        self.image_token = config.tokens.image
        self.stop = config.stop_ids
        layers = range(config.language.num_layers)
        self.past_names = [f"past_key_values.{i}.{k}" for i in layers for k in ("key", "value")]
        self.output_names = ["logits"] + [
            f"present.{i}.{k}" for i in layers for k in ("key", "value")
        ]

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
        patches, grids = [], []
        for index, data in enumerate(request.images):
            pixels, grid = self.images(decode_image(data, index, limits.max_input_pixels))
            patches.append(pixels)
            grids.append(grid)
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
        features = self.config.image.patch_features
        pixel_values = np.concatenate(patches) if patches else np.zeros((0, features), np.float32)
        grid_thw = np.array(grids, np.int64).reshape(-1, 3)
        return Prepared(ids, np.ascontiguousarray(pixel_values), grid_thw, sampling)

    def prefill(self, prepared: Prepared) -> tuple[Sequence, int, list[np.ndarray], np.ndarray]:
        """Vision + prompt prefill of one request -> (Sequence, first token, its cache, its
        mask INT64 [1, 1 + L]). The cache starts with one masked slot (mask 0): the profile
        has past >= 1 (a zero-length past is not a profile shape), and a masked slot gets
        exactly zero attention weight."""
        ids = prepared.ids
        embeds = np.array(self.embed[ids], np.float32)  # [L, H]: a copy of the rows
        if len(prepared.grid_thw):
            feeds = {"pixel_values": prepared.pixel_values, "grid_thw": prepared.grid_thw}
            embeds[ids == self.image_token] = self.vision.infer(feeds, ["image_embeds"])[
                "image_embeds"
            ]
        grids = [(int(t), int(h), int(w)) for t, h, w in prepared.grid_thw]
        positions, delta = rope_index(ids, grids, self.image_token, self.config.image.merge_size)
        cache, chunk = self.empty(), self.limits.prefill_chunk
        full = np.concatenate([[0], np.ones(len(ids), np.int64)])[None]  # [1, 1 + L]
        for start in range(0, len(ids), chunk):  # chunked prefill: inside the profile
            end = min(start + chunk, len(ids))
            logits, cache = self.step(
                embeds[None, start:end], full[:, : 1 + end], positions[:, None, start:end], cache
            )
        penalty = self.config.generation.repetition_penalty
        sampler = Sampler(prepared.sampling, penalty, logits.shape[-1], ids)
        stream = DecodeStream(skip_special_tokens=True)
        seq = Sequence(sampler, prepared.sampling.max_tokens, len(ids), delta, stream)
        return seq, sampler(logits[0]), cache, full

    def emit(self, seq: Sequence, token: int) -> TokenEvent:
        """Record a sampled token; the event says whether the sequence is finished."""
        seq.generated.append(token)
        piece = seq.stream.step(self.tokenizer, token) or ""
        reason = None
        if token in self.stop:
            reason = "stop"
        elif len(seq.generated) >= seq.max_tokens:
            reason = "length"
        return TokenEvent(token, piece, reason, seq.sampler.logprobs)

    def decode(
        self, seqs: Seq[Sequence], tokens: Seq[int], cache: list[np.ndarray], mask: np.ndarray
    ) -> tuple[list[int], list[np.ndarray], np.ndarray]:
        """One decode step for a batch (left-padded cache, ``mask`` INT64 [B, T]): each row's
        pending token at its own position -> next tokens, presents, the grown mask."""
        embeds = np.array(self.embed[list(tokens)], np.float32)[:, None, :]
        mask = np.concatenate([mask, np.ones((len(seqs), 1), np.int64)], axis=1)
        pos = np.array([s.length + s.delta for s in seqs], np.int64)
        positions = np.ascontiguousarray(np.broadcast_to(pos[None, :, None], (3, len(seqs), 1)))
        logits, cache = self.step(embeds, mask, positions, cache)
        for s in seqs:
            s.length += 1
        return [s.sampler(logits[b]) for b, s in enumerate(seqs)], cache, mask

    def step(
        self, embeds: np.ndarray, mask: np.ndarray, positions: np.ndarray, past: list[np.ndarray]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """One language-engine run: logits FP32 [B, V] of the last position + presents."""
        feeds = {"inputs_embeds": embeds, "attention_mask": mask, "position_ids": positions}
        feeds.update(zip(self.past_names, past, strict=True))
        out = self.language.infer(feeds, self.output_names)
        return out["logits"][:, 0, :], [out[name] for name in self.output_names[1:]]

    def empty(self) -> list[np.ndarray]:
        """The prefill's past: one masked slot of zeros per layer."""
        c = self.config.language
        return [np.zeros((1, c.kv_heads, 1, c.head_dim), np.float32)] * (2 * c.num_layers)

    def text(self, ids: list[int]) -> str:
        """The whole answer's text (``decode(skip_special_tokens=True)``, as transformers'
        batch_decode in Qwen2-VL's examples)."""
        text: str = self.tokenizer.decode(ids, skip_special_tokens=True)
        return text
