"""The model repository, logging and trace extensions over HTTP with tritonclient.http,
against the real server: the index, unload (503 until loaded again) and load (verify,
reload, warm up), refused load parameters, log settings read and changed, trace settings
answered OFF and a change refused by name; one implementation with gRPC (a change over
one front end shows over the other)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from ..conftest import RunningServer


def refused(call, *args, **kwargs) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call(*args, **kwargs)
    return info.value


def test_index_unload_and_load(start_server, two_outputs_dir: Path) -> None:
    server: RunningServer = start_server(two_outputs_dir)
    client = triton.InferenceServerClient(server.http_url)
    entry = {"name": "two-outputs", "version": "1", "state": "READY", "reason": ""}
    assert client.get_model_repository_index() == [entry]
    client.unload_model("two-outputs")
    assert client.get_model_repository_index()[0]["state"] == "UNAVAILABLE"
    assert not client.is_model_ready("two-outputs") and not client.is_server_ready()
    tensor = triton.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    assert refused(client.infer, "two-outputs", [tensor]).status() == "503"
    assert server.client().get_model_repository_index().models[0].state == "UNAVAILABLE"
    client.load_model("two-outputs")
    assert client.is_model_ready("two-outputs") and client.is_server_ready()
    assert client.infer("two-outputs", [tensor]).as_numpy("boxes").tolist() == [[2, 2, 2, 2]]
    error = refused(client.load_model, "two-outputs", config='{"max_batch_size": 2}')
    assert error.status() == "501" and "rebuild the image" in error.message()
    assert refused(client.load_model, "nope").status() == "404"


def test_log_and_trace_settings(start_server, two_outputs_dir: Path) -> None:
    server: RunningServer = start_server(two_outputs_dir)
    client = triton.InferenceServerClient(server.http_url)
    settings = client.get_log_settings()
    assert settings["log_info"] is True and settings["log_format"] == "text"
    changed = client.update_log_settings({"log_info": False, "log_verbose_level": 1})
    assert changed["log_info"] is False and changed["log_verbose_level"] == 1
    assert server.client().get_log_settings().settings["log_info"].bool_param is False
    error = refused(client.update_log_settings, {"log_colour": True})
    assert error.status() == "400" and "unknown log setting 'log_colour'" in error.message()
    assert client.get_trace_settings()["trace_level"] == ["OFF"]
    assert client.get_trace_settings("two-outputs")["trace_level"] == ["OFF"]
    error = refused(client.update_trace_settings, settings={"trace_level": ["TIMESTAMPS"]})
    assert error.status() == "501" and "does not trace requests" in error.message()
