"""The chat features of generation on the exported graphs, against transformers: a
conversation (system prompt, an earlier assistant turn, pictures in two user turns) gives
``generate``'s greedy ids on the processor's ``apply_chat_template`` inputs; logprobs are
the log-softmax of ``generate``'s raw logits (``output_logits``) at every step, the top
ones in its order, through the executor's ``output_logprobs`` JSON whose bytes join to the
answer; presence and frequency penalties change a greedy answer and repeat fewer tokens."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
import pytest
import torch
from PIL import Image

from mmaas.pipelines.qwen2_vl.runtime.budget import DecodeBudget
from mmaas.pipelines.qwen2_vl.runtime.conversation import read_messages
from mmaas.pipelines.qwen2_vl.runtime.executor import GenerationExecutor

from .conftest import PROMPTS, Loop, request

pytestmark = pytest.mark.slow
CONVERSATION = [
    {"role": "system", "content": "You are a careful describer of photographs."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPTS[0]}]},
    {"role": "assistant", "content": "A woman in a uniform."},
    {"role": "user", "content": [{"type": "text", "text": "And this one?"}, {"type": "image"}]},
]
NAMES = ("grace_hopper.jpg", "rocket.jpg")


def hf_conversation(pictures) -> list[dict]:
    """CONVERSATION in transformers' form, the pictures in its image parts."""
    images = iter(Image.open(io.BytesIO(pictures[n])) for n in NAMES)
    out = []
    for message in CONVERSATION:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts = [{**p, "image": next(images)} if p["type"] == "image" else p for p in content]
        out.append({"role": message["role"], "content": parts})
    return out


@torch.no_grad()
def reference_generate(reference, pictures, steps: int):
    """transformers' greedy generate on the conversation -> (new ids, raw logits [steps, V])."""
    inputs = reference.processor.apply_chat_template(
        hf_conversation(pictures), add_generation_prompt=True, tokenize=True,
        return_dict=True, return_tensors="pt",
    )  # fmt: skip
    out = reference.model.generate(
        **inputs, max_new_tokens=steps, do_sample=False, output_logits=True,
        return_dict_in_generate=True,
    )  # fmt: skip
    new = out.sequences[0, inputs["input_ids"].shape[1] :].tolist()
    return new, torch.stack([s[0] for s in out.logits]).double()


def test_a_conversation_gives_transformers_ids_and_logprobs(loop, reference, pictures) -> None:
    conversation = read_messages(json.dumps(CONVERSATION).encode())
    req = request("", [pictures[n] for n in NAMES], max_tokens=12, logprobs=5,
                  messages=conversation)  # fmt: skip
    events = loop.generate(req)
    want_ids, logits = reference_generate(reference, pictures, 12)
    assert [e.token_id for e in events] == want_ids
    want = torch.log_softmax(logits, -1).numpy()
    for step, event in enumerate(events):
        entry = event.logprobs
        assert entry is not None and entry.token == event.token_id
        assert entry.logprob == pytest.approx(want[step, event.token_id], abs=2e-3)
        top = np.argsort(-want[step], kind="stable")[:5]
        assert [i for i, _ in entry.top][:2] == top[:2].tolist()
        assert [v for _, v in entry.top] == pytest.approx(want[step, top], abs=2e-3)


def test_the_executors_logprobs_json_is_openais_shape(qwen_vl_export, pictures) -> None:
    running = Loop(qwen_vl_export)
    executor = GenerationExecutor(
        running.generator, running.scheduler, running.metrics, DecodeBudget(1 << 30)
    )
    arrays = {
        "text_input": np.array([PROMPTS[1].encode()], dtype=object),
        "image": np.array([pictures["rocket.jpg"]], dtype=object),
        "max_tokens": np.array([10], np.int32),
        "logprobs": np.array([3], np.int32),
    }
    try:
        out = asyncio.run(executor.infer(arrays, ["text_output", "output_ids",
                                                  "output_logprobs"], None))  # fmt: skip
    finally:
        running.close()
    entries = [json.loads(e) for e in out["output_logprobs"]]
    assert len(entries) == len(out["output_ids"]) == 10
    for entry in entries:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert len(entry["top_logprobs"]) == 3 and entry["logprob"] <= 0
        assert [t["logprob"] for t in entry["top_logprobs"]] == sorted(
            (t["logprob"] for t in entry["top_logprobs"]), reverse=True
        )
    joined = b"".join(bytes(e["bytes"]) for e in entries).decode(errors="replace")
    assert joined == out["text_output"][0].decode()


def test_penalties_change_a_greedy_answer_and_repeat_less(loop, pictures) -> None:
    data = [pictures["grace_hopper.jpg"]]
    plain = [e.token_id for e in loop.generate(request(PROMPTS[0], data, max_tokens=40))]
    penalised = loop.generate(
        request(PROMPTS[0], data, max_tokens=40, frequency_penalty=2.0, presence_penalty=2.0),
    )
    ids = [e.token_id for e in penalised]
    assert ids != plain
    assert len(set(ids)) > len(set(plain))  # fewer repeats
