"""The text rules (:mod:`mmaas.pipelines.qwen2_vl.runtime.text`) on the real tokenizer: the
joined stream equals the unary text and the tokenizer's decode of the ids, also when the
answer ends inside a multi-byte character; a stop string spanning two tokens is never sent,
text before it is never lost (C37); ``finish_reason`` is on the last piece only."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from mmaas.pipelines.qwen2_vl.runtime.generation import TokenEvent
from mmaas.pipelines.qwen2_vl.runtime.text import TextStream


@pytest.fixture(scope="module")
def tokenizer(qwen_vl_export: Path) -> Tokenizer:
    return Tokenizer.from_file(str(qwen_vl_export / "tokenizer.json"))


def run(tokenizer, ids, stops=(), last="length"):
    """Feed ``ids`` as the engine loop emits them (DecodeStream pieces, the last with its
    finish reason) -> [(piece, reason)] until the stream reports an end."""
    decode = DecodeStream(skip_special_tokens=True)
    text = TextStream(lambda i: tokenizer.decode(i, skip_special_tokens=True), stops)
    out = []
    for index, token in enumerate(ids):
        reason = last if index == len(ids) - 1 else None
        out.append(text.push(TokenEvent(token, decode.step(tokenizer, token) or "", reason)))
        if out[-1][1]:
            return out
    return out


def test_an_answer_cut_inside_a_character_is_flushed(tokenizer) -> None:
    ids = tokenizer.encode("ok 日本語 é😀", add_special_tokens=False).ids
    for end in range(1, len(ids) + 1):
        pieces = run(tokenizer, ids[:end])
        joined = "".join(piece for piece, _ in pieces)
        assert joined == tokenizer.decode(ids[:end], skip_special_tokens=True), end
        assert [reason for _, reason in pieces] == [None] * (end - 1) + ["length"]


def test_a_stop_string_across_two_tokens_is_never_sent(tokenizer) -> None:
    text = "The rocket flies. It lands later."
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    pieces = run(tokenizer, ids, stops=("s. It",))
    joined = "".join(piece for piece, _ in pieces)
    assert joined == "The rocket flie"
    assert pieces[-1][1] == "stop"
    sent = ""
    for piece, _ in pieces:  # no prefix of the stop string past what it really was
        sent += piece
        assert "s. It" not in sent


def test_held_text_that_is_no_stop_is_released(tokenizer) -> None:
    ids = tokenizer.encode("ab. abc", add_special_tokens=False).ids
    pieces = run(tokenizer, ids, stops=(". abd", "zz"))
    assert "".join(piece for piece, _ in pieces) == "ab. abc"
    assert pieces[-1][1] == "length"


def test_the_earliest_of_several_stops_wins(tokenizer) -> None:
    ids = tokenizer.encode("one two three", add_special_tokens=False).ids
    pieces = run(tokenizer, ids, stops=("three", "two", "x", "y"))
    assert "".join(piece for piece, _ in pieces) == "one "
    assert pieces[-1][1] == "stop"
