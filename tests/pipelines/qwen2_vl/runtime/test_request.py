"""Reading the Triton LLM inputs: absent optional inputs take the documented defaults, scalars
become Python numbers, and malformed values are refused naming the input. (A JSON client's
base64 data URL is decoded to the picture's bytes by HTTP generate, before the pipeline.)"""

from __future__ import annotations

import numpy as np
import pytest

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.runtime.request import read_request, token_outputs


def text(value: bytes = b"Hi") -> dict[str, np.ndarray]:
    return {"text_input": np.array([value], dtype=object)}


def test_absent_inputs_take_the_defaults() -> None:
    request = read_request(text())
    assert (request.text, request.images, request.max_tokens) == ("Hi", (), None)
    assert (request.temperature, request.top_p, request.top_k, request.seed) == (0.0, 1.0, 0, None)
    assert request.sampling(default_max_tokens=7).max_tokens == 7


def test_scalars_are_read_as_python_numbers() -> None:
    inputs = {**text(), "seed": np.array([5], np.int32), "top_p": np.array([0.5], np.float32)}
    request = read_request(inputs)
    assert request.seed == 5 and type(request.seed) is int and request.top_p == 0.5


def test_text_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(InputError, match=r"'text_input': not UTF-8 text \(invalid start byte"):
        read_request(text(b"\xff"))


def test_outputs_follow_the_interface_datatypes() -> None:
    outputs = token_outputs("é", [1, 2], "length", 9)
    assert outputs["text_output"].tolist() == ["é".encode()]
    assert outputs["output_ids"].dtype == np.int32
    assert outputs["finish_reason"].tolist() == [b"length"]
    assert outputs["num_input_tokens"].tolist() == [9]
    assert token_outputs("", [3], None, 9)["finish_reason"].tolist() == [b""]


def test_stop_strings_are_read_and_an_empty_one_is_refused() -> None:
    stops = np.array([b"\n\n", "é".encode()], dtype=object)
    assert read_request({**text(), "stop": stops}).stop == ("\n\n", "é")
    with pytest.raises(InputError, match="input 'stop' element 1: an empty stop string"):
        read_request({**text(), "stop": np.array([b"x", b""], dtype=object)})
    with pytest.raises(InputError, match="input 'stop' element 0: not UTF-8"):
        read_request({**text(), "stop": np.array([b"\xff"], dtype=object)})
