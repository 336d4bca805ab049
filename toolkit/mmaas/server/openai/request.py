"""An OpenAI ``POST /v1/chat/completions`` body -> the generation interface's inputs, by small
typed parsing (the runtime image has no pydantic). Every refusal is
:class:`~.errors.ChatError` (400) naming the field (``param``) as OpenAI does
(``messages[0].content[1].image_url``).

Fields (docs/openai.md has the table):

* ``model`` (required), ``messages`` (required; :mod:`.messages`: the conversation and its
  pictures' URLs, fetched later by :mod:`.fetch`);
* ``max_completion_tokens`` or ``max_tokens`` -> ``max_tokens``; ``temperature``, ``top_p``,
  ``top_k`` (extension), ``seed``, ``presence_penalty``, ``frequency_penalty`` -> the inputs
  of the same names (their ranges are the runtime's: one message for every interface);
  ``stop`` (a string or up to 4) -> ``stop``; ``logprobs`` with ``top_logprobs`` (0..20)
  -> ``logprobs`` (the alternatives per token);
* ``n`` (1..:data:`MAX_CHOICES`): that many choices (:mod:`.choices`);
* ``stream``, ``stream_options.include_usage``;
* ``response_format`` ``{"type": "text"}`` only, ``tools``/``functions`` none: anything
  else is refused naming the field (never one silent choice, never ignored);
* :data:`IGNORED`: accepted and documented no-ops (who the user is, storage and billing
  hints); every other field is refused naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmaas.server.openai.errors import ChatError
from mmaas.server.openai.messages import conversation
from mmaas.server.protocol.types import InferInput, Values

# Accepted, no effect on the answer: identification, storage and billing hints.
IGNORED = (
    "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
    "parallel_tool_calls", "tool_choice",
)  # fmt: skip
MAX_STOPS = 4
MAX_CHOICES = 16  # n: each choice is a generation of its own on the request path
MAX_TOP_LOGPROBS = 20
SCALARS = (  # (input, request field, datatype)
    ("temperature", "temperature", "FP32"), ("top_p", "top_p", "FP32"),
    ("top_k", "top_k", "INT32"), ("seed", "seed", "INT32"),
    ("presence_penalty", "presence_penalty", "FP32"),
    ("frequency_penalty", "frequency_penalty", "FP32"),
)  # fmt: skip
KNOWN = {"model", "messages", "max_tokens", "max_completion_tokens", "stop", "stream",
         "stream_options", "n", "logprobs", "top_logprobs", "response_format", "tools",
         "functions", *(source for _, source, _ in SCALARS), *IGNORED}  # fmt: skip


@dataclass
class ChatRequest:
    """A parsed request: the model, the generation interface's inputs but the pictures,
    the pictures' sources (``pictures[i]`` = (param, URL) of the ``image`` input's element
    i), ``n``, the request's seed (None: none given), the streaming wishes, whether
    logprobs are asked, and which field set each input (``names``)."""

    model: str
    inputs: list[InferInput] = field(default_factory=list)
    pictures: list[tuple[str, str]] = field(default_factory=list)
    n: int = 1
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    names: dict[str, str] = field(default_factory=dict)  # input -> request field


def parse_chat(document: Any) -> ChatRequest:
    """The request in a decoded JSON body.

    Raises:
        ChatError: see the module docstring.
    """
    if not isinstance(document, dict):
        raise ChatError("the request body must be a JSON object")
    for name in document:
        if name not in KNOWN:
            raise ChatError(f"unrecognized request argument supplied: {name}", name)
    _refuse_unsupported(document)
    model = document.get("model")
    if not isinstance(model, str) or not model:
        raise ChatError("'model' must be the name of a served model (GET /v1/models)", "model")
    chat = ChatRequest(model)
    messages, chat.pictures = conversation(document.get("messages"))
    chat.inputs.append(InferInput("messages", "BYTES", (1,), Values([messages])))
    _sampling(document, chat)
    _choices_and_logprobs(document, chat)
    chat.stream = _typed(document, "stream", bool, False)
    options = document.get("stream_options")
    if options is not None:
        if not chat.stream:
            raise ChatError("stream_options is only allowed with stream: true", "stream_options")
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise ChatError("stream_options takes only include_usage", "stream_options")
        chat.include_usage = _typed(options, "include_usage", bool, False, "stream_options.")
    return chat


def _refuse_unsupported(document: dict[str, Any]) -> None:
    """Fields whose only accepted value is their default (see the module docstring)."""
    response_format = document.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise ChatError(
            "response_format: only {'type': 'text'} is served (no constrained decoding)",
            "response_format",
        )
    for name in ("tools", "functions"):
        if document.get(name):
            raise ChatError(f"{name} are not supported by this model server", name)


def _sampling(document: dict[str, Any], chat: ChatRequest) -> None:
    """max_tokens, the scalars of :data:`SCALARS` and stop -> inputs."""
    limits = [(name, document.get(name)) for name in ("max_completion_tokens", "max_tokens")]
    given = [(name, value) for name, value in limits if value is not None]
    if len(given) == 2 and given[0][1] != given[1][1]:
        raise ChatError("max_tokens and max_completion_tokens differ; send one", "max_tokens")
    scalars = [("max_tokens", given[0][0], "INT32")] if given else []
    for name, source, datatype in [*scalars, *SCALARS]:
        value = _number(document, source, datatype == "INT32")
        if value is not None:
            chat.inputs.append(InferInput(name, datatype, (1,), Values([value])))
            chat.names[name] = source
    chat.seed = _number(document, "seed", True)
    stop = document.get("stop")
    if stop is None:
        return
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ChatError("'stop' must be a string or a list of strings", "stop")
    if len(stops) > MAX_STOPS:
        raise ChatError(f"'stop' holds {len(stops)} strings; at most {MAX_STOPS}", "stop")
    if stops:
        chat.inputs.append(InferInput("stop", "BYTES", (len(stops),), Values(stops)))
        chat.names["stop"] = "stop"


def _choices_and_logprobs(document: dict[str, Any], chat: ChatRequest) -> None:
    """``n`` (1..MAX_CHOICES); ``logprobs`` (bool) with ``top_logprobs`` (0..20, only with
    ``logprobs: true``) -> the ``logprobs`` input."""
    n = _number(document, "n", True)
    if n is not None and not 1 <= n <= MAX_CHOICES:
        raise ChatError(f"'n': {n} is out of range; 1 <= n <= {MAX_CHOICES}", "n")
    chat.n = n or 1
    chat.logprobs = _typed(document, "logprobs", bool, False)
    top = _number(document, "top_logprobs", True)
    if top is not None and not chat.logprobs:
        raise ChatError("top_logprobs needs logprobs: true", "top_logprobs")
    if top is not None and not 0 <= top <= MAX_TOP_LOGPROBS:
        raise ChatError(
            f"'top_logprobs': {top} is out of range; 0 <= top_logprobs <= {MAX_TOP_LOGPROBS}",
            "top_logprobs",
        )
    if chat.logprobs:
        chat.inputs.append(InferInput("logprobs", "INT32", (1,), Values([top or 0])))
        chat.names["logprobs"] = "top_logprobs" if top is not None else "logprobs"


def _number(document: dict[str, Any], name: str, integral: bool) -> Any:
    """``document[name]``: an integer (a 32-bit one) or, unless ``integral``, a number;
    None when absent or null."""
    value = document.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)):
        raise ChatError(f"'{name}' must be {'an integer' if integral else 'a number'}, "
                        f"got {value!r:.40}", name)  # fmt: skip
    if integral and not -(2**31) <= value < 2**31:
        raise ChatError(f"'{name}': {value} does not fit a 32-bit integer", name)
    return value


def _typed(document: dict[str, Any], name: str, kind: type, default: Any, prefix: str = "") -> Any:
    """``document[name]`` of type ``kind`` (``default`` when absent or null)."""
    value = document.get(name)
    if value is None:
        return default
    if type(value) is not kind:
        raise ChatError(f"'{prefix}{name}' must be a {kind.__name__}, got {value!r:.40}",
                        prefix + name)  # fmt: skip
    return value
