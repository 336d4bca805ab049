"""models/qwen-vl's image on a real Docker engine, answering with real clients (tritonclient
gRPC, the example client): greedy output_ids for two real pictures of different sizes x two
prompts equal transformers' ``Qwen2VLForConditionalGeneration.generate(do_sample=False)``
on the checkpoint; the stream equals the unary answer; a seeded sampled answer is the same
twice; concurrent streams overlap; the example client prints the streamed answer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PIL import Image
from scripts import qwen_vl_client as client

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PAIR = ("grace_hopper.jpg", "rocket.jpg")  # 512x600 and 640x427
PROMPTS = ("Describe this picture.", "What is the person in the image holding, and why?")


def expected_ids(reference, pictures: Path, names, prompt: str, n: int) -> list[int]:
    images = [Image.open(pictures / name) for name in names]
    return reference.generate(images, prompt, n).new_ids


@pytest.mark.parametrize("prompt", PROMPTS, ids=["describe", "holding"])
@pytest.mark.parametrize("name", PAIR)
def test_greedy_output_ids_equal_transformers(
    url, reference, qwen_vl_pictures, name, prompt
) -> None:
    answer = client.ask(url, "qwen-vl", prompt, [(qwen_vl_pictures / name).read_bytes()],
                        max_tokens=24)  # fmt: skip
    assert answer.ids == expected_ids(reference, qwen_vl_pictures, [name], prompt, 24)
    assert answer.text == reference.tokenizer.decode(answer.ids, skip_special_tokens=True)


def test_the_stream_equals_the_unary_answer(url, qwen_vl_pictures) -> None:
    images = [(qwen_vl_pictures / "rocket.jpg").read_bytes()]
    unary = client.ask(url, "qwen-vl", PROMPTS[1], images, max_tokens=32)
    pieces = list(client.stream(url, "qwen-vl", PROMPTS[1], images, max_tokens=32))
    assert [token for _, token, _ in pieces] == unary.ids
    assert "".join(piece for piece, _, _ in pieces) == unary.text
    assert len(unary.ids) == 32


def test_a_seeded_sampled_answer_is_the_same_twice(url, qwen_vl_pictures) -> None:
    images = [(qwen_vl_pictures / "grace_hopper.jpg").read_bytes()]
    params = {"max_tokens": 24, "temperature": 0.8, "top_p": 0.9, "top_k": 50}
    first = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=1234, **params)
    again = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=1234, **params)
    other = client.ask(url, "qwen-vl", PROMPTS[0], images, seed=99, **params)
    assert first.ids == again.ids != other.ids


def test_concurrent_streams_are_served_together(url, qwen_vl_pictures) -> None:
    """Two short streams start once a long one has its first token; each gets its first
    token while the long one is still streaming (a server that answers one stream at a time
    would finish all 1024 tokens of the long one first). No clock is compared: the long
    stream is cancelled as soon as both short ones have begun."""
    images = [(qwen_vl_pictures / "grace_hopper.jpg").read_bytes()]
    long_started, short_started = threading.Event(), [threading.Event(), threading.Event()]
    long_tokens: list[int] = []
    short_tokens: dict[int, int] = {}

    def long_stream() -> None:
        for _ in client.stream(url, "qwen-vl", PROMPTS[0], images, max_tokens=1024):
            long_tokens.append(1)
            long_started.set()
            if all(event.is_set() for event in short_started):
                return  # both short streams began while this one streamed: cancel it
        long_started.set()  # ended (all tokens, or a stop id) before both short ones began

    def short_stream(index: int) -> None:
        long_started.wait(timeout=120)
        count = 0
        for _ in client.stream(url, "qwen-vl", PROMPTS[0], images, max_tokens=8):
            short_started[index].set()
            count += 1
        short_tokens[index] = count

    threads = [threading.Thread(target=long_stream)]
    threads += [threading.Thread(target=short_stream, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert short_tokens == {0: 8, 1: 8}
    assert 0 < len(long_tokens) < 1024, "the long stream ended before both short ones began"


def test_the_example_client_prints_the_streamed_answer(url, qwen_vl_pictures, capsys) -> None:
    picture = str(qwen_vl_pictures / "grace_hopper.jpg")
    assert client.main([picture, "-q", PROMPTS[0], "--url", url, "--max-tokens", "16",
                        "--ids"]) == 0  # fmt: skip
    streamed = capsys.readouterr().out
    assert client.main([picture, "-q", PROMPTS[0], "--url", url, "--max-tokens", "16",
                        "--ids", "--no-stream"]) == 0  # fmt: skip
    assert capsys.readouterr().out == streamed
    refused = "input 'temperature': -1.0 is out of range"
    assert client.main(["-q", "Hi", "--url", url, "--temperature", "-1"]) == 1
    assert refused in capsys.readouterr().err  # a stream's error has a message, no status
    assert client.main(["-q", "Hi", "--url", url, "--temperature", "-1", "--no-stream"]) == 1
    assert f"INVALID_ARGUMENT: {refused}" in capsys.readouterr().err
