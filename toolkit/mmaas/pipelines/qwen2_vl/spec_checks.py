"""The qwen2-vl kind's cross-checks of its engines and assets (see
:mod:`mmaas.pipelines.qwen2_vl.spec`). Each problem is (key path under
``pipeline.settings``, what is wrong and what to do)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mmaas.core.errors import IntegrityError
from mmaas.core.hashing import matches
from mmaas.core.manifest import ModelInfo, TensorInfo
from mmaas.pipelines.qwen2_vl.config import RuntimeConfig
from mmaas.spec.yamlio import KeyPath

Problems = list[tuple[KeyPath, str]]
HERE: KeyPath = ()
ENGINE_INPUTS = {
    "vision": {"pixel_values": ("FP32", 2), "grid_thw": ("INT64", 2)},
    "language": {"inputs_embeds": ("FP32", 3), "position_ids": ("INT64", 3),
                 "seqlens_k": ("INT32", 1), "logits_index": ("INT64", 1)},
}  # fmt: skip
ASSETS = ("runtime", "tokenizer", "embed_tokens")
EXPORT = "convert again (`mmaas convert qwen2-vl OUT_DIR`) and keep its files together"


def check_engines(engines: Mapping[str, ModelInfo]) -> Problems:
    """The two engines exist with the tensors the runtime feeds and reads, and the
    language profile's points are consistent."""
    missing = [name for name in ENGINE_INPUTS if name not in engines]
    if missing:
        names = ", ".join(missing)
        return [(HERE, f"the qwen2-vl pipeline needs engines named 'vision' and 'language' "
                       f"(missing: {names}); see models/qwen-vl/model.yaml")]  # fmt: skip
    problems: Problems = []
    for engine, wanted in ENGINE_INPUTS.items():
        declared = {t.name: t for t in engines[engine].inputs}
        for name, (datatype, rank) in wanted.items():
            tensor = declared.get(name)
            if tensor is None or (tensor.datatype, len(tensor.shape)) != (datatype, rank):
                problems.append((HERE, f"engine {engine!r} needs input {name!r} ({datatype}, "
                                       f"rank {rank}); {EXPORT}"))  # fmt: skip
    if problems:
        return problems
    vision_width = _output(engines["vision"], "image_embeds")
    language_width = _input(engines["language"], "inputs_embeds").shape[2]
    if vision_width is None or vision_width.shape[-1] != language_width:
        problems.append((HERE, f"engine 'vision' must output image_embeds of width "
                               f"{language_width} (the language engine's); {EXPORT}"))  # fmt: skip
    return problems + _check_language_profile(engines["language"])


def _check_language_profile(language: ModelInfo) -> Problems:
    """At each of min, opt, max: one batch size and position_ids [3, batch, seq] (the
    build runs these points; the cache's capacity is the graph's static axis, which the
    spec's own checks hold every point to)."""
    past = [t for t in language.inputs if t.name.startswith("past_key_values.")]
    if not past:
        return [(HERE, f"engine 'language' has no past_key_values.* inputs; {EXPORT}")]
    embeds, positions = _input(language, "inputs_embeds"), _input(language, "position_ids")
    rows = [_input(language, "seqlens_k"), _input(language, "logits_index")]
    problems: Problems = []
    if len({t.datatype for t in past}) != 1:
        problems.append((HERE, f"the language engine's cache inputs differ in type; {EXPORT}"))
    for point in ("min", "opt", "max"):
        e, p = getattr(embeds, point), getattr(positions, point)
        batches = {e[0], p[1], *(getattr(t, point)[0] for t in [*rows, *past])}
        if len(batches) != 1 or (p[0], p[2]) != (3, e[1]):
            shapes = f"inputs_embeds {list(e)}, position_ids {list(p)}"
            problems.append((HERE, (
                f"the language engine's {point} shapes do not fit together ({shapes}, batch "
                f"sizes {sorted(batches)}): at each point every input takes the same batch "
                "and position_ids is [3, batch, seq]")))  # fmt: skip
    return problems


def check_settings(settings: Any, engines: Mapping[str, ModelInfo]) -> Problems:
    """The settings fit the profiles: ``max_sequences`` and ``decode_batches`` within the
    language batch, ``vision_patch_buckets`` within the vision patches."""
    batch = _input(engines["language"], "inputs_embeds").max
    patches = _input(engines["vision"], "pixel_values").max
    problems: Problems = []
    limit = batch[0] if batch else 0
    for key, values in (("max_sequences", [settings.max_sequences or 0]),
                        ("decode_batches", settings.decode_batches)):  # fmt: skip
        if any(v > limit for v in values):
            problems.append(((key,), f"{values} is past the language profile's batch of "
                                     f"{limit} rows (inputs_embeds max, axis 0)"))  # fmt: skip
    top = patches[0] if patches else 0
    if any(b > top for b in settings.vision_patch_buckets):
        problems.append((("vision_patch_buckets",), f"{settings.vision_patch_buckets}: past "
                         f"the vision profile's {top} patches (pixel_values max)"))  # fmt: skip
    return problems


def check_assets(engines: Mapping[str, ModelInfo], assets: Mapping[str, Path]) -> Problems:
    """runtime.json, tokenizer.json and embed_tokens.npy are there and belong together and
    to these engines."""
    missing = [name for name in ASSETS if name not in assets]
    if missing:
        names = ", ".join(missing)
        return [(HERE, f"the qwen2-vl pipeline needs assets named {', '.join(ASSETS)} "
                       f"(missing: {names}); see models/qwen-vl/model.yaml")]  # fmt: skip
    try:
        config = RuntimeConfig.read(assets["runtime"])
    except IntegrityError as exc:
        return [(HERE, f"asset 'runtime': {exc}")]
    problems = [
        (HERE, f"asset {name!r} ({assets[name].name}) is not the file runtime.json was "
               f"exported with (sha256 differs); {EXPORT}")
        for name, file in (("tokenizer", "tokenizer.json"), ("embed_tokens", "embed_tokens.npy"))
        if not _pinned(assets[name], config.files.get(file))
    ]  # fmt: skip
    return problems + _check_dimensions(engines, assets["embed_tokens"], config)


def _check_dimensions(
    engines: Mapping[str, ModelInfo], table: Path, config: RuntimeConfig
) -> Problems:
    lang = engines["language"]
    pasts = [t for t in lang.inputs if t.name.startswith("past_key_values.")]
    have = {
        "num_layers": len(pasts) // 2,
        "kv_heads": pasts[0].shape[1],
        "head_dim": pasts[0].shape[3],
        "hidden_size": _input(lang, "inputs_embeds").shape[2],
        "vocab_size": logits.shape[-1] if (logits := _output(lang, "logits")) else None,
    }
    problems: Problems = [
        (HERE, f"runtime.json says {key} {getattr(config.language, key)!r}, the language "
               f"engine has {value!r}; {EXPORT}")
        for key, value in have.items()
        if getattr(config.language, key) != value
    ]  # fmt: skip
    try:
        shape = np.load(table, mmap_mode="r").shape
    except (OSError, ValueError) as exc:
        return [*problems, (HERE, f"asset 'embed_tokens': not a .npy array ({exc}); {EXPORT}")]
    if tuple(shape) != (have["vocab_size"], have["hidden_size"]):
        want = [have["vocab_size"], have["hidden_size"]]
        problems.append((HERE, f"asset 'embed_tokens' is {list(shape)}, expected [vocab, "
                               f"hidden] = {want}"))  # fmt: skip
    grid = _input(engines["vision"], "grid_thw")
    proved = config.prompt_proved_images
    if grid.max and grid.max[0] > proved:
        problems.append((HERE, f"the vision profile takes {grid.max[0]} images, but the chat "
                               f"template was proved for {proved}; convert with --max-images "
                               f"{grid.max[0]}"))  # fmt: skip
    return problems


def _input(info: ModelInfo, name: str) -> TensorInfo:
    return next(t for t in info.inputs if t.name == name)


def _output(info: ModelInfo, name: str) -> TensorInfo | None:
    return next((t for t in info.outputs if t.name == name), None)


def _pinned(path: Path, sha256: str | None) -> bool:
    try:
        return sha256 is not None and matches(path, f"sha256:{sha256}")
    except OSError:
        return False
