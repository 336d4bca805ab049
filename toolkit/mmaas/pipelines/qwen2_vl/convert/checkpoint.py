"""The Hugging Face checkpoint the export reads: a random seeded one written here (a published
configuration by name, ``--config``: ``small`` by default, or ``2b``), or a real Qwen2-VL
folder copied in (``mmaas convert qwen2-vl OUT_DIR --checkpoint DIR``).

``2b`` is Qwen2-VL-2B-Instruct's published configuration (text: hidden 1536, intermediate
8960, 28 layers, 12 heads, 2 key-value heads of 128, vocabulary 151936, tied embeddings,
M-RoPE sections [16, 24, 24], theta 1e6; vision: depth 32, width 1280, 16 heads, patch 14,
merge 2, temporal patch 2) with random weights (std 0.02, transformers' initializer range)
stored in bf16 like the real checkpoint (its FP32 and BF16 loads have the same weights), and
the tokenizer with Qwen2-VL's special tokens at their real ids (151643..151656). Writing it
takes about 9 GB of memory for the FP32 model.

The small one is transformers' ``Qwen2VLForConditionalGeneration`` with every structural
feature of the real model (M-RoPE with an ``mrope_section`` in Qwen2-VL-2B's proportions,
grouped-query attention, q/k/v biases, the vision tower with patch 14, temporal patch 2,
spatial merge 2 and the patch merger) at a small size: text 4 layers of width 256, 4 query
/ 2 key-value heads of 64, vocabulary 4096 (past the tokenizer's 4000 ids, padded like the
real 151936 > 151657); vision 2 blocks of width 64. Weights come from one seeded generator,
so the folder is byte-identical from run to run (same torch, transformers, Python stdlib).

Files (atomically, temp folder + rename): config.json, generation_config.json,
model.safetensors (``save_pretrained``), tokenizer.json, tokenizer_config.json (with the
chat template), preprocessor_config.json (``Qwen2VLImageProcessorPil``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from transformers import (
    GenerationConfig,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
)

from mmaas.core.errors import MmaasError
from mmaas.core.files import assembled, link_or_copy
from mmaas.pipelines.qwen2_vl.convert import tokenizer
from mmaas.pipelines.qwen2_vl.convert.tokenizer import token_id

SEED = 5  # of seeds 0-7 at std 0.08, the largest smallest greedy margin over the parity cases
INIT_STD = 0.08  # 0.04 repeats one token, 0.15 is chaotic (FP32 vs FP64 logits 1e-4)
INIT_STD_2B = 0.02  # transformers' initializer_range: a 1536-wide model's activations stay O(1)
REAL_REGULAR = 151643  # Qwen2-VL's regular tokens: its special tokens start here
MODEL_VOCAB = 4096
# The small checkpoint's pixel bounds: min = the real checkpoint's 56x56 (4 patches); max
# 896x896 = 4096 patches, the CPU vision profile's max (the real 12845056 = 65536 patches is
# far past one CPU attention engine), so transformers' processor loaded from the folder gives
# exactly the grids the engine takes.
MIN_PIXELS = 56 * 56
MAX_PIXELS = 896 * 896
# Files of a real checkpoint that the export and the transformers reference read.
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "model.safetensors.index.json",
)


class CheckpointError(MmaasError):
    """The checkpoint folder is unusable or does not load as transformers' Qwen2-VL (exit 1)."""


def small_config() -> Qwen2VLConfig:
    """The small Qwen2-VL config (see the module docstring); M-RoPE section [8, 12, 12]
    (sum 32 = head_dim / 2, the real [16, 24, 24] halved), theta 1e6, special-token ids
    of the small tokenizer."""
    return _config(
        {"vocab_size": MODEL_VOCAB, "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "tie_word_embeddings": False},
        {"depth": 2, "embed_dim": 64, "num_heads": 4, "hidden_size": 256},
        [8, 12, 12], tokenizer.BPE_VOCAB,
    )  # fmt: skip


def config_2b() -> Qwen2VLConfig:
    """Qwen2-VL-2B-Instruct's published configuration (module docstring), real token ids."""
    return _config(
        {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
         "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
         "tie_word_embeddings": True},
        {"depth": 32, "embed_dim": 1280, "num_heads": 16, "hidden_size": 1536},
        [16, 24, 24], REAL_REGULAR,
    )  # fmt: skip


def _config(text: dict, vision: dict, section: list[int], regular: int) -> Qwen2VLConfig:
    """A Qwen2-VL config of these sizes: SiLU, RMSNorm eps 1e-6, 32768 positions, theta
    1e6, vision MLP ratio 4, patch 14, temporal patch 2, merge 2, special tokens after
    ``regular`` regular ones."""
    tie = text["tie_word_embeddings"]
    return Qwen2VLConfig(
        text_config={
            **text,
            "hidden_act": "silu",
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": section,
            },
            "bos_token_id": token_id("<|endoftext|>", regular),
            "eos_token_id": token_id("<|im_end|>", regular),
            "pad_token_id": token_id("<|endoftext|>", regular),
        },
        vision_config={
            **vision,
            "mlp_ratio": 4,
            "patch_size": 14,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
            "in_channels": 3,
        },
        image_token_id=token_id("<|image_pad|>", regular),
        video_token_id=token_id("<|video_pad|>", regular),
        vision_start_token_id=token_id("<|vision_start|>", regular),
        vision_end_token_id=token_id("<|vision_end|>", regular),
        tie_word_embeddings=tie,
    )


# name -> (config, regular tokens, default std, stored dtype)
CONFIGS = {
    "small": (small_config, tokenizer.BPE_VOCAB, INIT_STD, torch.float32),
    "2b": (config_2b, REAL_REGULAR, INIT_STD_2B, torch.bfloat16),
}


def randomize(model: torch.nn.Module, seed: int, std: float) -> None:
    """Draw every parameter from one seeded generator, in name order: matrices N(0, std);
    biases N(0, std) and norm weights 1 + N(0, 0.1) (transformers' own init zeroes biases
    and sets norms to one, which would hide an export that drops the q/k/v biases)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
            if "norm" in name or name.endswith("ln_q.weight"):
                param.copy_(1.0 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                param.copy_(std * noise)


def generation_config(regular: int = tokenizer.BPE_VOCAB) -> GenerationConfig:
    """generation_config.json like Qwen2-VL-Instruct's: stop on ``<|im_end|>`` or
    ``<|endoftext|>``, sampling defaults, and repetition_penalty 1.05, which
    ``generate(do_sample=False)`` applies too (so the runtime's penalty path is in every
    parity run)."""
    return GenerationConfig(
        bos_token_id=token_id("<|endoftext|>", regular),
        pad_token_id=token_id("<|endoftext|>", regular),
        eos_token_id=[token_id("<|im_end|>", regular), token_id("<|endoftext|>", regular)],
        do_sample=True,
        temperature=0.01,
        top_p=0.001,
        top_k=1,
        repetition_penalty=1.05,
    )


def write_seeded(output: Path, name: str = "small", seed: int = SEED,
                 std: float | None = None) -> None:  # fmt: skip
    """Write the seeded checkpoint of configuration ``name`` (``CONFIGS``) into a temp
    folder beside ``output``, then swap it in."""
    make_config, regular, default_std, dtype = CONFIGS[name]
    with assembled(output) as temp:
        tokenizer.build_tokenizer(regular).save(str(temp / "tokenizer.json"))
        config = json.dumps(tokenizer.tokenizer_config(regular), indent=2) + "\n"
        (temp / "tokenizer_config.json").write_text(config)
        torch.manual_seed(seed)
        model = Qwen2VLForConditionalGeneration(make_config()).float().eval()
        randomize(model, seed, default_std if std is None else std)
        model.generation_config = generation_config(regular)
        model.to(dtype).save_pretrained(temp)
        size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
        Qwen2VLImageProcessorPil(size=size).save_pretrained(temp)
        for written in temp.iterdir():
            os.chmod(written, 0o644)


def copy_real(source: Path, output: Path) -> None:
    """Copy a real checkpoint's config, tokenizer, processor and safetensors files into
    ``output`` (hard links where the file system allows: a 2B checkpoint is 4.4 GB).

    Raises:
        CheckpointError: no config.json, tokenizer.json, preprocessor_config.json or
            *.safetensors in ``source``.
    """
    for required in ("config.json", "tokenizer.json", "preprocessor_config.json"):
        if not (source / required).is_file():
            raise CheckpointError(f"{source / required}: not found; --checkpoint takes a folder")
    shards = sorted(source.glob("*.safetensors"))
    if not shards:
        raise CheckpointError(f"{source}: no *.safetensors files")
    if source.resolve() == output.resolve():
        return
    with assembled(output) as temp:
        for path in [*(source / n for n in CHECKPOINT_FILES), *shards]:
            if path.is_file():
                link_or_copy(path, temp / path.name)


def load_model(checkpoint: Path) -> Qwen2VLForConditionalGeneration:
    """The checkpoint's model in FP32, eval mode (local files only).

    Raises:
        CheckpointError: transformers cannot load it as Qwen2-VL.
    """
    try:
        model = Qwen2VLForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.float32)
    except Exception as exc:  # the loader's many errors (safetensors' own, too): the folder's
        raise CheckpointError(
            f"{checkpoint}: not a Qwen2-VL checkpoint transformers loads ({type(exc).__name__}: "
            f"{exc})"
        ) from exc
    return model.eval()
