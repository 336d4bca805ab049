"""The model.yaml of a conversion, written into its OUT_DIR: models/qwen-vl/model.yaml is this
text for the small checkpoint (a test keeps the two equal); a real checkpoint's engines have
other widths and layer counts (Qwen2-VL-2B: 28 layers, 2 kv heads of 128, width 1536: 56
past inputs to list by hand otherwise).

The language engine's one optimization profile is a box over (batch, seq, past, total =
past + seq) whose min, opt and max corners are each consistent (the graph only runs
there); the runtime prefills in chunks of at most ``prefill_chunk`` tokens and decodes up
to past = context - 1, so every run it makes lies inside the box.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    """The served limits an export is built for (tokens, rows, patches, images); each
    field's ``help`` metadata is its option's help in ``mmaas convert qwen2-vl``."""

    context: int = field(default=4096, metadata={"help": "tokens of prompt + answer"})
    prefill_chunk: int = field(default=1024, metadata={"help": "prompt tokens per prefill run"})
    decode_batch: int = field(default=4, metadata={"help": "requests per decode step"})
    max_patches: int = field(default=4096, metadata={"help": "image patches per request"})
    max_images: int = field(default=8, metadata={"help": "pictures per request"})
    opt_past: int = field(default=511, metadata={"help": "the tuned cache length (opt)"})


HEADER = """\
# mmaas model spec: Qwen2-VL as a service -- a picture and a question in, the answer out,
# streamed token by token (pipeline kind qwen2-vl). Written by mmaas convert qwen2-vl
# for {what}; see README.md beside it. Check it with
# `mmaas validate models/qwen-vl`; build it with `mmaas build models/qwen-vl`.
name: qwen-vl
version: "2.0.0"
description: Qwen2-VL vision-language generation (Triton LLM interface, streaming)
engines:
  # The vision encoder: normalised 14x14x2 patches of every picture of a request and
  # their grids -> image embeddings (one per 2x2 patches). 4 patches = one 56x56 picture;
  # {max_patches} patches per request in all; {max_images} pictures at most.
  vision:
    source: {{path: qwen2_vl_vision.onnx}}
    inputs:
{pixel_values}
{grid_thw}
  # The decoder with an explicit KV cache. One profile box over (batch B, seq S, past P,
  # total T = P + S); each corner consistent: min (1, 1, 1, 2),
  # opt (1, 1, {opt_past}, {opt_total}), max ({batch}, {chunk}, {max_past}, {max_total}).
  # Prefill starts from one masked past slot (a past of 0 is no profile shape) and runs
  # in chunks of <= {chunk} tokens; decode steps batch up to {batch} requests; the context is
  # past max + 1 = {context} tokens.
  language:
    source: {{path: qwen2_vl_language.onnx}}
    inputs:
{inputs_embeds}
      - name: attention_mask
        min: [1, 2]
        opt: [1, {opt_total}]
        max: [{batch}, {max_total}]
        sample_values: 1  # attend everywhere (0 marks left padding)
{position_ids}
"""
FOOTER = """\
# The export's side files, hashed into the manifest and verified with the engines.
assets:
  runtime: runtime.json            # token ids, image settings, chat template parts
  tokenizer: tokenizer.json        # read with the tokenizers library
  embed_tokens: embed_tokens.npy   # FP32 [vocab, hidden]: text-token embeddings
pipeline:
  kind: qwen2-vl
  serve_engines: [vision]  # qwen-vl-vision: embeddings for clients that preprocess
  settings:
    max_input_pixels: 64000000  # largest encoded picture (w x h), checked before decoding
"""


def render(layers: int, kv_heads: int, head_dim: int, hidden: int, profile: Profile,
           what: str) -> str:  # fmt: skip
    """model.yaml for an export with these language dimensions and ``profile``."""
    p = profile
    features, past_max = 3 * 2 * 14 * 14, p.context - 1
    values = {
        "what": what, "max_patches": p.max_patches,
        "max_images": p.max_images, "hidden": hidden, "batch": p.decode_batch,
        "chunk": p.prefill_chunk, "opt_past": p.opt_past, "opt_total": p.opt_past + 1,
        "max_past": past_max, "max_total": past_max + p.prefill_chunk,
        "context": p.context, "kv": kv_heads, "dim": head_dim,
    }  # fmt: skip
    chunk, batch = p.prefill_chunk, p.decode_batch
    lines = {
        "pixel_values": line("pixel_values", [4, features], [1024, features],
                             [p.max_patches, features]),
        "grid_thw": line("grid_thw", [1, 3], [1, 3], [p.max_images, 3]),
        "inputs_embeds": line("inputs_embeds", [1, 1, hidden], [1, 1, hidden],
                              [batch, chunk, hidden]),
        "position_ids": line("position_ids", [3, 1, 1], [3, 1, 1], [3, batch, chunk]),
    }  # fmt: skip
    past = "".join(
        line(f"past_key_values.{i}.{kind}", [1, kv_heads, 1, head_dim],
             [1, kv_heads, p.opt_past, head_dim], [batch, kv_heads, past_max, head_dim]) + "\n"
        for i in range(layers)
        for kind in ("key", "value")
    )  # fmt: skip
    return HEADER.format(**values, **lines) + past + FOOTER


def line(name: str, low: list[int], opt: list[int], high: list[int]) -> str:
    """One input of a profile, in flow style."""
    return f"      - {{name: {name}, min: {low}, opt: {opt}, max: {high}}}"
