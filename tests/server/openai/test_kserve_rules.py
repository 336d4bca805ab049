"""The same rules on the KServe interfaces of ``mmaas serve models/qwen-vl`` (the server of
this package's fixture): request-level ``parameters`` honoured (``max_tokens: 3`` gives 3
tokens) or refused naming them; ``stop`` and ``finish_reason``; the joined gRPC stream
equals the unary text and the tokenizer's decode of ``output_ids`` also when sampling ends
inside a multi-byte character; ModelConfig's ``decoupled: true`` over gRPC and HTTP."""

from __future__ import annotations

import pytest
import tritonclient.grpc as triton
from scripts import qwen_vl_client as client
from tokenizers import Tokenizer
from tritonclient.utils import InferenceServerException

from .conftest import data_url, events

pytestmark = pytest.mark.slow
QUESTION = "Describe this picture."


def test_request_parameters_are_honoured_or_refused(served) -> None:
    url = f"127.0.0.1:{served.grpc_port}"
    grpc = triton.InferenceServerClient(url)
    inputs = client.request_inputs(QUESTION, [])
    result = grpc.infer("qwen-vl", inputs, parameters={"max_tokens": 3, "stop": "zzzz"})
    assert len(result.as_numpy("output_ids")) == 3
    assert result.as_numpy("finish_reason").tolist() == [b"length"]
    with pytest.raises(InferenceServerException, match="unknown request parameter 'max_token'"):
        grpc.infer("qwen-vl", inputs, parameters={"max_token": 3})
    twice = client.request_inputs(QUESTION, [], max_tokens=4)
    with pytest.raises(InferenceServerException, match="both as a tensor and as a request"):
        grpc.infer("qwen-vl", twice, parameters={"max_tokens": 3})
    status, answer = served.request("POST", "/v2/models/qwen-vl/infer", {
        "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["Hi"]}],
        "parameters": {"max_tokens": 2, "binary_data_output": False},
    })  # fmt: skip
    assert status == 200, answer
    ids = next(o for o in answer["outputs"] if o["name"] == "output_ids")
    assert len(ids["data"]) == 2
    grpc.close()


def test_generate_takes_stop_strings_and_reports_why_it_ended(served, pictures) -> None:
    body = {"text_input": QUESTION, "image": [data_url(pictures["rocket.jpg"])],
            "max_tokens": 30}  # fmt: skip
    _, plain = served.request("POST", "/v2/models/qwen-vl/generate", body)
    text = plain["text_output"]
    stop = text[10:13]
    _, stopped = served.request("POST", "/v2/models/qwen-vl/generate", {**body, "stop": [stop]})
    assert stopped["text_output"] == text[: text.index(stop)]
    assert (plain["finish_reason"], stopped["finish_reason"]) == ("length", "stop")
    status, stream = served.request(
        "POST", "/v2/models/qwen-vl/generate_stream", {**body, "parameters": {"stop": stop}}
    )
    assert status == 200, stream
    chunks = events(stream)
    assert "".join(c["text_output"] for c in chunks) == stopped["text_output"]
    assert [c["finish_reason"] for c in chunks] == [""] * (len(chunks) - 1) + ["stop"]


def test_the_joined_stream_equals_the_unary_text_and_the_decode(served, qwen_vl_export) -> None:
    """Sampled answers cut by max_tokens inside a multi-byte character of this small
    tokenizer (seeds and lengths found so; the last assert checks they still are): the
    gRPC stream keeps the last bytes."""
    tokenizer = Tokenizer.from_file(str(qwen_vl_export / "tokenizer.json"))
    url = f"127.0.0.1:{served.grpc_port}"
    cut = 0
    for seed, max_tokens in [(0, 3), (5, 5), (11, 4), (1, 10), (9, 9), (2, 6)]:
        params = {"max_tokens": max_tokens, "temperature": 1.5, "seed": seed}
        unary = client.ask(url, "qwen-vl", "Write 日本語 😀 ünïcödé.", [], **params)
        pieces = list(client.stream(url, "qwen-vl", "Write 日本語 😀 ünïcödé.", [], **params))
        decoded = tokenizer.decode(unary.ids, skip_special_tokens=True)
        assert "".join(piece for piece, _, _ in pieces) == unary.text == decoded, seed
        cut += decoded.endswith("\ufffd")
    assert cut, "no answer ended inside a character: the flush was not exercised"


def test_model_config_says_decoupled(served) -> None:
    grpc = triton.InferenceServerClient(f"127.0.0.1:{served.grpc_port}")
    config = grpc.get_model_config("qwen-vl").config
    assert config.model_transaction_policy.decoupled is True
    assert (
        grpc.get_model_config("qwen-vl-vision").config.model_transaction_policy.decoupled is False
    )
    _, over_http = served.request("GET", "/v2/models/qwen-vl/config")
    assert over_http["model_transaction_policy"] == {"decoupled": True}
    names = [o.name for o in grpc.get_model_metadata("qwen-vl").outputs]
    assert names == [
        "text_output",
        "output_ids",
        "finish_reason",
        "num_input_tokens",
        "output_logprobs",
    ]
    grpc.close()
