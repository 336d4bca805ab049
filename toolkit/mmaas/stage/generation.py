"""The build-time generation gate (``checks.generation``) of a KV-cache decoder engine
(:mod:`mmaas.core.decoder`), run by the builder stage: the engine against a reference
generation recorded at FP32 (transformers, by ``mmaas convert``), so that an engine built at
a lower precision (fp16, bf16) is refused when it no longer generates what its model does.

The sample (``.npz``): ``count`` prompts; for prompt i, ``embeds_i`` FP32 [L + N, hidden] and
``positions_i`` INT64 [3, L + N] (the prompt's L tokens, then the reference's N greedy
tokens), ``prompt_i`` (L), ``tokens_i`` INT64 [N] (the reference's greedy token after the
prompt and each continuation prefix) and ``logits_i`` FP32 [vocab] (its first-step logits).

The engine runs through the back end's bound-engine capability (its cache allocated once,
written in place, as the runtime runs it): each prompt in chunks of the profile's sequence
length, then one decode step per continuation token (teacher forced: the reference's token
is fed whatever the engine chose). Figures: the share of steps whose greedy token (the
first largest logit) is the reference's, each prompt's first-step logits cosine, and the
count of NaN or infinite logits. It passes with ``top1 >= min_top1``, every cosine
``>= min_cosine`` and no NaN or Inf; else :class:`~mmaas.stage.accuracy.GateFailed` names
the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mmaas.backends import Engine
from mmaas.backends.bound import BoundEngine, bound_engine
from mmaas.core import decoder
from mmaas.core.errors import BuildError
from mmaas.core.manifest import ModelInfo
from mmaas.core.request import GenerationCheck
from mmaas.stage.accuracy import GateFailed


def generation_gate(
    engine: Engine, model: ModelInfo, check: GenerationCheck, sample: Path
) -> dict[str, Any]:
    """Run the gate (module docstring); returns its report.

    Raises:
        GateFailed: a figure is outside its bound (the report is attached).
        BuildError: the sample cannot be read, or the back end cannot run the engine in place.
    """
    bound = bound_engine(engine)
    if bound is None:
        raise BuildError(f"generation gate: back end {model.backend} cannot run in place")
    try:
        data = dict(np.load(sample))
        count = int(data["count"])
    except (OSError, ValueError, KeyError) as exc:
        raise BuildError(f"generation gate: sample {sample.name}: {exc}") from exc
    past = [t for t in model.inputs if t.name.startswith("past_key_values.")]
    embeds_max = next(t for t in model.inputs if t.name == decoder.EMBEDS).max
    chunk = embeds_max[1] if embeds_max else 1
    shape = (1, *(past[0].max or past[0].shape)[1:])
    cache = [bound.allocate(shape, past[0].datatype) for _ in past]
    layers = len(past) // 2
    pasts = dict(zip(decoder.past_names(layers), cache, strict=True))
    presents = dict(zip(decoder.present_names(layers), cache, strict=True))
    hits = steps = nonfinite = 0
    cosines = []
    for i in range(count):
        prompt_hits, logits = _prompt(bound, data, i, chunk, pasts, presents)
        hits, steps = hits + sum(prompt_hits), steps + len(prompt_hits)
        nonfinite += sum(int((~np.isfinite(row)).sum()) for row in logits)
        cosines.append(_cosine(logits[0], data[f"logits_{i}"]))
    top1 = hits / max(steps, 1)
    report = {
        "passed": top1 >= check.min_top1 and min(cosines) >= check.min_cosine and not nonfinite,
        "reference": f"{sample.name}: {count} prompts, FP32 reference generation",
        "top1_agreement": top1, "steps": steps, "min_top1": check.min_top1,
        "first_step_cosine": cosines, "min_cosine": check.min_cosine,
        "nonfinite_logits": nonfinite,
    }  # fmt: skip
    if not report["passed"]:
        raise GateFailed(
            f"generation gate failed: greedy top-1 agreement {top1:.4f} over {steps} steps "
            f"(min {check.min_top1}), first-step logits cosine min {min(cosines):.6f} (min "
            f"{check.min_cosine}), {nonfinite} NaN/Inf logits",
            report,
            hint="the engine no longer generates what the FP32 model does: build at a higher "
            "precision (fp16 or fp32), or loosen checks.generation if this is acceptable",
        )
    return report


def _prompt(bound: BoundEngine, data: dict[str, np.ndarray], i: int, chunk: int,
            pasts: dict[str, Any], presents: dict[str, Any]
            ) -> tuple[list[bool], list[np.ndarray]]:  # fmt: skip
    """Run prompt ``i`` and its teacher-forced continuation: per step whether the greedy
    token is the reference's, and the logits of each step FP32 [vocab]."""
    embeds, positions = data[f"embeds_{i}"], data[f"positions_{i}"]
    length, tokens = int(data[f"prompt_{i}"]), data[f"tokens_{i}"]
    logits, done = [], 0
    while done < length:  # the prompt, continued from 0 in chunks
        n = min(chunk, length - done)
        row = _run(bound, embeds[done : done + n], positions[:, done : done + n], done + n, pasts,
                   presents)  # fmt: skip
        done += n
    logits.append(row)
    for k in range(1, len(tokens)):  # each reference token fed at its own position
        at = length + k - 1
        logits.append(_run(bound, embeds[at : at + 1], positions[:, at : at + 1], at + 1, pasts,
                           presents))  # fmt: skip
    hits = [int(np.argmax(row)) == int(token) for row, token in zip(logits, tokens, strict=True)]
    return hits, logits


def _run(bound: BoundEngine, embeds: np.ndarray, positions: np.ndarray, total: int,
         pasts: dict[str, Any], presents: dict[str, Any]) -> np.ndarray:  # fmt: skip
    """One run of batch 1 whose cache holds ``total`` tokens after it; the logits of its
    last token FP32 [vocab]."""
    feeds = {
        decoder.EMBEDS: np.ascontiguousarray(embeds[None], np.float32),
        decoder.POSITIONS: np.ascontiguousarray(positions[:, None], np.int64),
        decoder.SEQLENS: np.array([total - 1], np.int32),
        decoder.LOGITS_INDEX: np.array([len(embeds) - 1], np.int64),
        **pasts,
    }
    out = bound.run(feeds, {decoder.LOGITS: None, **presents})
    return np.asarray(out[decoder.LOGITS].read()[0], np.float64)


def _cosine(got: np.ndarray, want: np.ndarray) -> float:
    norms = float(np.linalg.norm(got) * np.linalg.norm(want))
    return float(np.dot(np.nan_to_num(got), want) / norms) if norms else 0.0
