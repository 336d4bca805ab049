"""The seeded checkpoints' tokenizer: a byte-level BPE trained with the ``tokenizers`` library
on Python's own standard-library sources, with exactly Qwen2's pipeline and Qwen2-VL's 14
special tokens (nothing can be downloaded here, so the real vocabulary cannot be used).

The small checkpoint's special tokens follow its 3986 regular tokens. A real-size one's sit
at Qwen2-VL's real ids (151643 onwards): the ids between are placeholder tokens no merge
makes (``<|reserved_N|>``: never produced by encoding, decoded as their text), so the
regular vocabulary has the real 151643 entries.

Why the pipeline must be Qwen2's (NFC, Qwen2's split regex "isolated", byte-level without
prefix space or regex, byte-level decoder): transformers 5's ``Qwen2Tokenizer`` rebuilds
that pipeline from the file's vocab and merges and takes only the post-processor from the
file, while the runtime reads tokenizer.json with ``tokenizers`` alone; any other pipeline
would make the two tokenize differently. The export's validation
(:func:`mmaas.pipelines.qwen2_vl.export.validate.validate_tokenizer`) proves the ids equal.
"""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
    processors,
)
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

from mmaas.core.errors import MmaasError

# Qwen2's pre-tokenizer split (transformers/models/qwen2/tokenization_qwen2.py).
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen2-VL's added tokens, in the order of their ids 151643..151656 in the real tokenizer.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
BPE_VOCAB = 3986  # regular tokens; the specials take 3986..3999 (the real: 151643..151656)
TRAINING_BYTES = 6_000_000
# Qwen2-VL-2B-Instruct's tokenizer_config.json chat_template, verbatim.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TokenizerError(MmaasError):
    """The trained tokenizer does not have the expected vocabulary."""


def training_files(limit_bytes: int = TRAINING_BYTES) -> list[str]:
    """The top-level ``*.py`` files of Python's standard library, sorted by name, up to
    ``limit_bytes`` in total: real English and code text present wherever Python is."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files, total = [], 0
    for path in sorted(stdlib.glob("*.py")):
        size = path.stat().st_size
        if total + size > limit_bytes:
            break
        files.append(str(path))
        total += size
    return files


def qwen2_pipeline(model: BPE) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` around ``model`` with Qwen2Tokenizer's pipeline (see the
    module docstring) and the real file's byte-level post-processor."""
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def build_tokenizer(regular: int = BPE_VOCAB) -> Tokenizer:
    """Train the BPE (:data:`BPE_VOCAB` tokens, all 256 bytes included), pad the vocabulary
    with placeholders to ``regular`` tokens, and append the special tokens at ids
    ``regular`` onwards in Qwen2's order. Deterministic for the same Python standard
    library.

    Raises:
        TokenizerError: the training gave another vocabulary size or token ids.
    """
    tokenizer = qwen2_pipeline(
        BPE(
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    trainer = BpeTrainer(
        vocab_size=BPE_VOCAB,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train(training_files(), trainer)
    if tokenizer.get_vocab_size() != BPE_VOCAB:
        raise TokenizerError(f"BPE training gave {tokenizer.get_vocab_size()}, not {BPE_VOCAB}")
    if regular > BPE_VOCAB:
        data = json.loads(tokenizer.to_str())
        data["model"]["vocab"].update({f"<|reserved_{i}|>": i for i in range(BPE_VOCAB, regular)})
        tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    )
    for token in SPECIAL_TOKENS:
        if tokenizer.token_to_id(token) != token_id(token, regular):
            raise TokenizerError(f"{token} got id {tokenizer.token_to_id(token)}")
    return tokenizer


def token_id(token: str, regular: int = BPE_VOCAB) -> int:
    """The id a special token has in a tokenizer of ``regular`` regular tokens (and in its
    checkpoint's config.json)."""
    return regular + SPECIAL_TOKENS.index(token)


def tokenizer_config(regular: int = BPE_VOCAB) -> dict[str, object]:
    """tokenizer_config.json as Qwen2-VL-Instruct's, for transformers 5: Qwen2Tokenizer,
    eos ``<|im_end|>``, pad ``<|endoftext|>``, no bos, every added token special, the
    chat template."""
    return {
        "tokenizer_class": "Qwen2Tokenizer",
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": 32768,
        "added_tokens_decoder": {
            str(token_id(t, regular)): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in SPECIAL_TOKENS
        },
        "additional_special_tokens": SPECIAL_TOKENS[1:],
        "chat_template": CHAT_TEMPLATE,
    }
