"""The model.yaml of a conversion, written into its OUT_DIR: models/qwen-vl/model.yaml is this
text for the small checkpoint on the CPU, models/qwen-vl-gpu/model.yaml for it on a GPU (a
test keeps both equal); a real-size checkpoint's engines have other widths and layer counts
(Qwen2-VL-2B: 28 layers, 2 kv heads of 128, width 1536: 56 cache inputs to list by hand).

The language engine's profile is a box over (batch, seq): decode steps of up to
``decode_batch`` rows, prompt chunks of up to ``prefill_chunk`` tokens; its cache inputs
hold ``context`` tokens per row (fixed in the graph). At every corner of the box the sample
lengths (seqlens_k 0, logits_index 0) are a valid run, so the build's profile check runs it
(the cache inputs' sample is zeros: a 2B model's largest batch holds 7.5 GB of cache).
On a GPU the vision engine replays CUDA graphs at the pipeline's patch buckets (each bucket
holds its largest single picture plus one 4-patch dummy per other image row).
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


# Published configurations' served profiles (``--config``): 2b decodes 64 sequences.
PRESETS = {
    "small": Profile(),
    "2b": Profile(context=4096, prefill_chunk=2048, decode_batch=64, max_patches=4108,
                  max_images=4),
}  # fmt: skip


@dataclass(frozen=True)
class Target:
    """Where the engines run: ``device`` cpu or gpu; ``precision`` the language graph's
    (fp32 on the CPU; fp16 or bf16 on a GPU, where the vision engine is built in fp16)."""

    device: str = "cpu"
    precision: str = "fp32"


def patch_buckets(profile: Profile) -> list[int]:
    """The vision engine's captured patch counts: 256, 1024 and 4096 patches of one picture
    plus 4 per other image row (the padding dummies), within the profile."""
    extra = 4 * (profile.max_images - 1)
    return [n + extra for n in (256, 1024, 4096) if n + extra <= profile.max_patches]


HEADER = """\
# mmaas model spec: Qwen2-VL as a service -- a picture and a question in, the answer out,
# streamed token by token (pipeline kind qwen2-vl). Written by mmaas convert qwen2-vl
# for {what};
# see README.md beside it. Check it with `mmaas validate {folder}`; build it with
# `mmaas build {folder}`.
name: {name}
version: "2.0.0"
description: Qwen2-VL vision-language generation (Triton LLM interface, streaming)
engines:
  # The vision encoder: normalised 14x14x2 patches of every picture of a request and
  # their grids -> image embeddings (one per 2x2 patches). 4 patches = one 56x56 picture;
  # {max_patches} patches per request in all; {max_images} pictures at most.
  vision:
    source: {{path: qwen2_vl_vision.onnx}}
{vision_build}    inputs:
{pixel_values}
{grid_thw}
  # The decoder over a KV cache read and written in place (GroupQueryAttention): decode
  # steps of up to {batch} sequences, prompt chunks of up to {chunk} tokens; each cache row
  # holds {context} tokens (prompt + answer).
  language:
    source: {{path: qwen2_vl_language.onnx}}
{language_build}    inputs:
{inputs_embeds}
{position_ids}
{seqlens_k}
        sample_values: 0  # one token per row: a valid run at every profile point
{logits_index}
        sample_values: 0
"""
FOOTER = """\
# The export's side files, hashed into the manifest and verified with the engines.
assets:
  runtime: runtime.json            # token ids, image settings, chat template parts
  tokenizer: tokenizer.json        # read with the tokenizers library
  embed_tokens: embed_tokens.npy   # FP32 [vocab, hidden]: text-token embeddings
pipeline:
  kind: qwen2-vl
  serve_engines: [vision]  # {name}-vision: embeddings for clients that preprocess
  settings:
    max_input_pixels: 64000000  # largest encoded picture (w x h), checked before decoding
{settings}"""


def render(layers: int, kv_heads: int, head_dim: int, hidden: int, profile: Profile,
           what: str, target: Target = Target()) -> str:  # fmt: skip
    """model.yaml for an export with these language dimensions, ``profile`` and ``target``."""
    p, gpu = profile, target.device == "gpu"
    features, chunk, batch = 3 * 2 * 14 * 14, p.prefill_chunk, p.decode_batch
    name = "qwen-vl-gpu" if gpu else "qwen-vl"
    values = {"what": what, "name": name, "folder": f"models/{name}",
              "max_patches": p.max_patches, "max_images": p.max_images, "batch": batch,
              "chunk": chunk, "context": p.context}  # fmt: skip
    lines = {
        "pixel_values": line("pixel_values", [4, features], [1024, features],
                             [p.max_patches, features]),
        "grid_thw": line("grid_thw", [1, 3], [1, 3], [p.max_images, 3]),
        "inputs_embeds": line("inputs_embeds", [1, 1, hidden], [1, 1, hidden],
                              [batch, chunk, hidden]),
        "position_ids": line("position_ids", [3, 1, 1], [3, 1, 1], [3, batch, chunk]),
        "seqlens_k": block("seqlens_k", [1], [1], [batch]),
        "logits_index": block("logits_index", [1], [1], [batch]),
    }  # fmt: skip
    cache = [1, kv_heads, p.context, head_dim], [batch, kv_heads, p.context, head_dim]
    past = "".join(
        line(f"past_key_values.{i}.{kind}", cache[0], cache[0], cache[1], ", sample_values: 0")
        + "\n"
        for i in range(layers)
        for kind in ("key", "value")
    )
    vision_build = settings = ""
    language_build = (
        "    checks:  # greedy agreement with the FP32 reference (language_gate.npz)\n"
        "      generation: {samples: language_gate.npz, min_top1: 0.9, min_cosine: 0.99}\n"
    )
    if gpu:
        buckets = patch_buckets(p)
        shapes = "".join(f"          - {{pixel_values: [{b}, {features}], grid_thw: "
                         f"[{p.max_images}, 3]}}\n" for b in buckets)  # fmt: skip
        vision_build = ("    target_precision: fp16  # exported in fp16 (attention in FP32)\n"
                        "    build:\n      onnxruntime:\n        device: gpu\n"
                        "        cuda_graphs: true  # one per patch bucket of the pipeline\n"
                        f"        cuda_graph_shapes:\n{shapes}")  # fmt: skip
        language_build += (
            f"    target_precision: {target.precision}  # the graph's own type\n"
            "    build: {onnxruntime: {device: gpu}}  # graphs: the pipeline's\n"
        )
        settings = (f"    max_sequences: {batch}  # sequences generated at once (KV slots)\n"
                    "    kv_cache_memory: 0.5  # share of the free GPU memory for the cache\n"
                    f"    vision_patch_buckets: {buckets}\n")  # fmt: skip
    values.update(vision_build=vision_build, language_build=language_build)
    return HEADER.format(**values, **lines) + past + FOOTER.format(name=name, settings=settings)


def line(name: str, low: list[int], opt: list[int], high: list[int], extra: str = "") -> str:
    """One input of a profile, in flow style (``extra``: more keys, e.g. sample values)."""
    return f"      - {{name: {name}, min: {low}, opt: {opt}, max: {high}{extra}}}"


def block(name: str, low: list[int], opt: list[int], high: list[int]) -> str:
    """One input of a profile in block style (its sample values follow)."""
    return f"      - name: {name}\n        min: {low}\n        opt: {opt}\n        max: {high}"
