"""Generation on the exported graphs equals transformers' generate on the checkpoint: greedy
ids for two real pictures x two prompts, several images, text only, extreme sizes (C28);
stop ids; streamed text; seeded sampling; every request-level refusal (C31 context, image
count and patch budget) before any engine work; the runtime imports no torch, transformers
or jinja2. The comparison can fail: zeroed image embeddings change the ids."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmaas.core.errors import InputError

from .conftest import LIMITS, PAIR, PROMPTS, encode, request

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[4]


def ids_of(events) -> list[int]:
    return [event.token_id for event in events]


def reference_ids(reference, pictures, names, prompt, n, **kwargs) -> list[int]:
    images = [Image.open(io.BytesIO(pictures[name])) for name in names]
    return reference.generate(images, prompt, n, **kwargs).new_ids


@pytest.mark.parametrize(("name", "prompt"), list(zip(PAIR, PROMPTS, strict=True)), ids=PAIR)
def test_greedy_ids_equal_transformers(loop, reference, pictures, name, prompt) -> None:
    """(The image's test, tests/test_qwen_vl_image.py, runs all four pairs through gRPC.)"""
    ours = ids_of(loop.generate(request(prompt, [pictures[name]], max_tokens=32)))
    assert ours == reference_ids(reference, pictures, [name], prompt, 32)
    assert len(ours) == 32


@pytest.mark.parametrize(
    "names", [list(PAIR), ["coffee.png", "grace_hopper.jpg", "astronaut.png"], []],
    ids=["2 images", "3 images", "text only"],
)  # fmt: skip
def test_several_images_and_none_equal_transformers(loop, reference, pictures, names) -> None:
    prompt = PROMPTS[0] if names else "Write a Python function that adds two numbers."
    ours = ids_of(loop.generate(request(prompt, [pictures[n] for n in names], max_tokens=24)))
    assert ours == reference_ids(reference, pictures, names, prompt, 24)


@pytest.mark.parametrize("size", [(1, 1), (690, 15420)], ids=str)
def test_extreme_sizes_transformers_accepts_give_its_ids(loop, reference, size) -> None:
    base = Image.open(ROOT / "models" / "qwen-vl" / "pictures" / "grace_hopper.jpg")
    data = encode(base.resize(size, Image.Resampling.BICUBIC))
    ours = ids_of(loop.generate(request(PROMPTS[0], [data], max_tokens=16)))
    want = reference.generate([Image.open(io.BytesIO(data))], PROMPTS[0], 16).new_ids
    assert ours == want


def test_a_prompt_prefilled_in_chunks_gives_the_same_ids(loop, pictures) -> None:
    req = request(PROMPTS[0], [pictures["grace_hopper.jpg"]], max_tokens=16)  # 414 tokens
    whole = ids_of(loop.generate(req))
    loop.scheduler.chunk = 100  # 5 chunks: the first from 0, then continued prompts
    try:
        assert ids_of(loop.generate(req)) == whole
    finally:
        loop.scheduler.chunk = LIMITS.prefill_chunk


def test_a_stop_id_ends_both_at_the_same_step(loop, reference, pictures) -> None:
    data = [pictures["rocket.jpg"]]
    full = reference_ids(reference, pictures, ["rocket.jpg"], PROMPTS[0], 32)
    stop = full[6]
    want = reference_ids(reference, pictures, ["rocket.jpg"], PROMPTS[0], 32, eos_token_id=[stop])
    saved, loop.generator.stop = loop.generator.stop, frozenset({stop})
    try:
        events = loop.generate(request(PROMPTS[0], data, max_tokens=32))
    finally:
        loop.generator.stop = saved
    assert ids_of(events) == want == full[: full.index(stop) + 1]
    assert events[-1].finish_reason == "stop"


def test_streamed_pieces_join_to_the_whole_text(loop, reference, pictures) -> None:
    events = loop.generate(request(PROMPTS[1], [pictures["rocket.jpg"]], max_tokens=40))
    ids = ids_of(events)
    assert "".join(e.text for e in events) == loop.generator.text(ids)
    assert loop.generator.text(ids) == reference.tokenizer.decode(ids, skip_special_tokens=True)
    assert events[-1].finish_reason == "length"


def test_a_seeded_sampled_answer_is_the_same_twice(loop, pictures) -> None:
    params = {"max_tokens": 24, "temperature": 0.8, "top_p": 0.9, "top_k": 50}
    data = [pictures["grace_hopper.jpg"]]
    first = ids_of(loop.generate(request(PROMPTS[0], data, seed=1234, **params)))
    again = ids_of(loop.generate(request(PROMPTS[0], data, seed=1234, **params)))
    other = ids_of(loop.generate(request(PROMPTS[0], data, seed=99, **params)))
    assert first == again != other
    greedy = ids_of(loop.generate(request("Hi", max_tokens=8)))
    tiny = ids_of(loop.generate(request("Hi", max_tokens=8, temperature=1e-8, seed=3)))
    assert tiny == greedy  # temperature 1e-8 is as good as greedy


def test_zeroed_image_embeddings_change_the_ids(loop, reference, pictures) -> None:
    vision = loop.generator.pictures.engine

    class Zeros:
        def infer(self, inputs, outputs):
            embeds = vision.infer(inputs, outputs)["image_embeds"]
            return {"image_embeds": np.zeros_like(embeds)}

    loop.generator.pictures.engine = Zeros()
    try:
        ours = ids_of(loop.generate(request(PROMPTS[0], [pictures["grace_hopper.jpg"]],
                                            max_tokens=16)))  # fmt: skip
    finally:
        loop.generator.pictures.engine = vision
    assert ours != reference_ids(reference, pictures, ["grace_hopper.jpg"], PROMPTS[0], 16)


def test_requests_over_the_limits_are_refused_before_the_engines(loop, pictures) -> None:
    rocket = pictures["rocket.jpg"]
    big = encode(Image.new("RGB", (896, 896), (5, 5, 5)))
    cases = {
        r"'image': 9 images; the vision engine's profile takes at most 8": ("Hi", [rocket] * 9, {}),
        r"the images need 8192 patches after resizing \(64x64, 64x64\).*at most 4096": (
            "Hi", [big, big], {}),
        r"the prompt is \d+ tokens \(\d+ text \+ 0 image tokens\); the context limit is 4096": (
            "word " * 5000, [], {}),
        r"'max_tokens': 4090 \+ the prompt's \d+ tokens .* exceed the context limit of 4096": (
            "Hi", [], {"max_tokens": 4090}),
        r"'max_tokens': 0 is out of range": ("Hi", [], {"max_tokens": 0}),
    }  # fmt: skip
    for message, (text, images, params) in cases.items():
        with pytest.raises(InputError, match=message):
            loop.generator.prepare(request(text, images, **params))


ISOLATED = """
import sys
for name in ("torch", "transformers", "jinja2"):
    sys.modules[name] = None  # importing them now fails
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from pathlib import Path
from pipelines.qwen2_vl.runtime import conftest as c
folder = Path(sys.argv[1]) / "models" / "qwen-vl"
loop = c.Loop(folder)
image = (folder / "pictures" / "rocket.jpg").read_bytes()
print([e.token_id for e in loop.generate(c.request(sys.argv[2], [image], max_tokens=16))])
loop.close()
"""


def test_the_runtime_needs_no_torch_transformers_or_jinja2(reference, pictures) -> None:
    run = subprocess.run(
        [sys.executable, "-c", ISOLATED, str(ROOT), PROMPTS[1]],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    want = reference_ids(reference, pictures, ["rocket.jpg"], PROMPTS[1], 16)
    assert run.stdout.strip().splitlines()[-1] == str(want)
