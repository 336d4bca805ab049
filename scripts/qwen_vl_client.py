"""Ask the ``qwen-vl`` image a question about pictures and print the answer as it streams.

Sends the picture files' bytes as they are (the server decodes, resizes and normalises them)
and the question through ``tritonclient.grpc`` in Triton's LLM interface: ``text_input``,
``image`` (one element per picture), ``max_tokens``, and the sampling inputs you give. With
streaming (the default) it uses ``ModelStreamInfer`` and prints each token's text as it
comes; ``--no-stream`` sends one ``ModelInfer`` and prints the whole answer.

Usage:
    python scripts/qwen_vl_client.py PICTURE [PICTURE ...] -q "What is in this picture?"
        [--url localhost:8001] [--model qwen-vl] [--max-tokens 64]
        [--temperature T --top-p P --top-k K --seed S] [--no-stream] [--ids]

Exit 1 with the server's message on stderr when it refuses the request (e.g.
INVALID_ARGUMENT naming the bad input) or cannot be reached.
"""

from __future__ import annotations

import argparse
import queue
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

SCALARS = {"max_tokens": "INT32", "temperature": "FP32", "top_p": "FP32", "top_k": "INT32",
           "seed": "INT32"}  # fmt: skip
NUMPY = {"INT32": np.int32, "FP32": np.float32}


class ClientError(Exception):
    """The server refused the request or could not be reached (its message)."""


@dataclass
class Answer:
    """What came back: the text, the generated ids, and (streaming) the time of each token
    from the request's start in seconds."""

    text: str = ""
    ids: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


def request_inputs(question: str, images: list[bytes], **params: Any) -> list[Any]:
    """The request's InferInputs: ``text_input`` BYTES [1], ``image`` BYTES [N] when there
    are pictures, and every sampling parameter that is not None in its datatype [1]."""
    text = triton.InferInput("text_input", [1], "BYTES")
    text.set_data_from_numpy(np.array([question.encode()], dtype=object))
    inputs = [text]
    if images:
        image = triton.InferInput("image", [len(images)], "BYTES")
        image.set_data_from_numpy(np.array(images, dtype=object))
        inputs.append(image)
    for name, value in params.items():
        if value is None:
            continue
        datatype = SCALARS[name]
        tensor = triton.InferInput(name, [1], datatype)
        tensor.set_data_from_numpy(np.array([value], dtype=NUMPY[datatype]))
        inputs.append(tensor)
    return inputs


def reason(error: InferenceServerException) -> str:
    """``STATUS: message`` of a refused request; only the message for a streamed request's
    error (ModelStreamInferResponse carries ``error_message`` and no status code)."""
    status = error.status()
    return f"{status}: {error.message()}" if status else str(error.message())


def ask(url: str, model: str, question: str, images: list[bytes], **params: Any) -> Answer:
    """One ModelInfer: the whole answer at once."""
    client = triton.InferenceServerClient(url)
    try:
        result = client.infer(model, request_inputs(question, images, **params))
    except InferenceServerException as exc:
        raise ClientError(reason(exc)) from None
    finally:
        client.close()
    text = result.as_numpy("text_output")[0].decode()
    return Answer(text, result.as_numpy("output_ids").tolist())


def stream(
    url: str, model: str, question: str, images: list[bytes], **params: Any
) -> Iterator[tuple[str, int, float]]:
    """ModelStreamInfer: yields (text piece, token id, seconds since the request) per token,
    until the response flagged ``triton_final_response``."""
    events: queue.Queue[Any] = queue.Queue()
    client = triton.InferenceServerClient(url)
    started = time.perf_counter()
    client.start_stream(callback=lambda result, error: events.put((result, error)))
    try:
        try:
            client.async_stream_infer(
                model, request_inputs(question, images, **params), enable_empty_final_response=True
            )
        except InferenceServerException as exc:  # the stream failed: the callback says why
            result, error = events.get(timeout=5) if not events.empty() else (None, exc)
            raise ClientError(reason(error)) from None
        while True:
            result, error = events.get()
            if error is not None:
                raise ClientError(reason(error))
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            ids = result.as_numpy("output_ids")
            if ids is not None and len(ids):
                piece = result.as_numpy("text_output")[0].decode()
                yield piece, int(ids[0]), time.perf_counter() - started
            if final:
                return
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()


def main(argv: list[str]) -> int:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pictures", nargs="*", type=Path)
    parser.add_argument("-q", "--question", required=True)
    parser.add_argument("--url", default="localhost:8001")
    parser.add_argument("--model", default="qwen-vl")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--ids", action="store_true", help="also print the generated ids")
    args = parser.parse_args(argv)
    params = {"max_tokens": args.max_tokens, "temperature": args.temperature,
              "top_p": args.top_p, "top_k": args.top_k, "seed": args.seed}  # fmt: skip
    try:
        images = [path.read_bytes() for path in args.pictures]
        if args.no_stream:
            answer = ask(args.url, args.model, args.question, images, **params)
            print(answer.text)
        else:
            answer = Answer()
            for piece, token, _ in stream(args.url, args.model, args.question, images, **params):
                print(piece, end="", flush=True)
                answer.ids.append(token)
            print()
        if args.ids:
            print(f"output_ids: {answer.ids}")
    except (ClientError, OSError) as exc:
        print(f"qwen_vl_client: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
