"""An OpenAI ``POST /v1/chat/completions`` body -> the generation interface's inputs, by small
typed parsing (the runtime image has no pydantic). Every refusal is :class:`ChatError`
(400) naming the field (``param``) as OpenAI does (``messages[0].content[1].image_url``).

Fields (docs/openai.md has the table):

* ``model`` (required), ``messages`` (required; see :func:`_conversation`);
* ``max_completion_tokens`` or ``max_tokens`` -> ``max_tokens``; ``temperature``, ``top_p``,
  ``top_k`` (extension), ``seed`` -> the inputs of the same names (their ranges are the
  runtime's: one message for every interface); ``stop`` (a string or up to 4) -> ``stop``;
* ``stream``, ``stream_options.include_usage``;
* ``n`` 1 only, ``logprobs`` false only, ``presence_penalty``/``frequency_penalty`` 0 only,
  ``response_format`` ``{"type": "text"}`` only, ``tools``/``functions`` none: anything
  else is refused naming the field (never one silent choice, never ignored);
* :data:`IGNORED`: accepted and documented no-ops (who the user is, storage and billing
  hints); every other field is refused naming it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from mmaas.server.protocol.types import InferInput, Values

# Accepted, no effect on the answer: identification, storage and billing hints.
IGNORED = (
    "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
    "parallel_tool_calls", "tool_choice",
)  # fmt: skip
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
MAGIC = {  # the accepted picture formats' first bytes, by the MIME type a data URL declares
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/jpg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "image/bmp": (b"BM",),
    "image/tiff": (b"II*\x00", b"MM\x00*"),
}
MAX_STOPS = 4


class ChatError(Exception):
    """A request OpenAI's API answers with 4xx: ``status``, ``message``, ``param`` (the
    field at fault, dotted with indices), ``code`` and ``type`` of OpenAI's error body."""

    def __init__(
        self, message: str, param: str | None = None, status: int = 400,
        code: str | None = None, kind: str = "invalid_request_error",
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.message, self.param, self.status, self.code, self.kind = (
            message, param, status, code, kind,
        )  # fmt: skip


@dataclass
class ChatRequest:
    """A parsed request: the model, the inputs for the generation interface, where each
    picture came from (``pictures[i]`` = the param of the ``image`` input's element i),
    the streaming wishes, and which field set ``max_tokens``."""

    model: str
    inputs: list[InferInput] = field(default_factory=list)
    pictures: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    names: dict[str, str] = field(default_factory=dict)  # input -> request field


def parse_chat(document: Any) -> ChatRequest:
    """The request in a decoded JSON body.

    Raises:
        ChatError: see the module docstring.
    """
    if not isinstance(document, dict):
        raise ChatError("the request body must be a JSON object")
    known = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
             "top_k", "seed", "stop", "stream", "stream_options", "n", "logprobs",
             "top_logprobs", "presence_penalty", "frequency_penalty", "response_format",
             "tools", "functions", *IGNORED}  # fmt: skip
    for name in document:
        if name not in known:
            raise ChatError(f"unrecognized request argument supplied: {name}", name)
    _refuse_unsupported(document)
    model = document.get("model")
    if not isinstance(model, str) or not model:
        raise ChatError("'model' must be the name of a served model (GET /v1/models)", "model")
    chat = ChatRequest(model)
    text, pictures = _conversation(document.get("messages"))
    chat.inputs.append(InferInput("text_input", "BYTES", (1,), Values([text.encode()])))
    if pictures:
        chat.pictures = [param for param, _ in pictures]
        data = [blob for _, blob in pictures]
        chat.inputs.append(InferInput("image", "BYTES", (len(data),), Values(data)))
    _sampling(document, chat)
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
    if document.get("n", 1) != 1:
        raise ChatError("only n: 1 is served (one choice per request); send n requests", "n")
    if document.get("logprobs") not in (None, False) or document.get("top_logprobs") is not None:
        param = "top_logprobs" if document.get("top_logprobs") is not None else "logprobs"
        raise ChatError("logprobs are not served by this server", param)
    for name in ("presence_penalty", "frequency_penalty"):
        if document.get(name) not in (None, 0, 0.0):
            raise ChatError(f"{name} is not served: only 0 (the default) is accepted", name)
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
    """max_tokens, temperature, top_p, top_k, seed and stop -> inputs."""
    limits = [(name, document.get(name)) for name in ("max_completion_tokens", "max_tokens")]
    given = [(name, value) for name, value in limits if value is not None]
    if len(given) == 2 and given[0][1] != given[1][1]:
        raise ChatError("max_tokens and max_completion_tokens differ; send one", "max_tokens")
    scalars = [("max_tokens", given[0][0], "INT32")] if given else []
    scalars += [("temperature", "temperature", "FP32"), ("top_p", "top_p", "FP32"),
                ("top_k", "top_k", "INT32"), ("seed", "seed", "INT32")]  # fmt: skip
    for name, source, datatype in scalars:
        value = document.get(source)
        if value is None:
            continue
        integral = datatype == "INT32"
        if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)):
            kind = "an integer" if integral else "a number"
            raise ChatError(f"'{source}' must be {kind}, got {value!r:.40}", source)
        if integral and not -(2**31) <= value < 2**31:
            raise ChatError(f"'{source}': {value} does not fit a 32-bit integer", source)
        chat.inputs.append(InferInput(name, datatype, (1,), Values([value])))
        chat.names[name] = source
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


def _conversation(messages: Any) -> tuple[str, list[tuple[str, bytes]]]:
    """The one user turn the chat template serves -> (its text, [(param, picture bytes)]).

    Rule: ``messages`` holds one message, role ``user``; its content is a string or
    parts, ``text`` and ``image_url`` (a ``data:`` URL of an accepted format) in any
    order. The pictures go first in the turn, in their order, then the text parts joined
    (the served template's layout: images, then text)."""
    if not isinstance(messages, list) or not messages:
        raise ChatError("'messages' must be a non-empty list of messages", "messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ChatError(f"{where} must be an object with role and content", where)
        role = message.get("role")
        if role not in ROLES:
            raise ChatError(f"{where}.role: {role!r:.40} is not one of {', '.join(ROLES)}",
                            f"{where}.role")  # fmt: skip
        if role != "user" or index > 0:
            raise ChatError(
                f"{where}: this model serves one user message per request (the chat "
                f"template it was converted with holds one user turn); got role {role!r} "
                f"at index {index}",
                f"{where}.role",
            )
    return _content(messages[0].get("content"), "messages[0].content")


def _content(content: Any, where: str) -> tuple[str, list[tuple[str, bytes]]]:
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list) or not content:
        raise ChatError(f"{where} must be a string or a non-empty list of parts", where)
    texts: list[str] = []
    pictures: list[tuple[str, bytes]] = []
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ChatError(f"{at}.text must be a string, got {text!r:.40}", f"{at}.text")
            texts.append(text)
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else None
            if not isinstance(url, str):
                raise ChatError(f"{at}.image_url.url must be a URL string", f"{at}.image_url.url")
            pictures.append((f"{at}.image_url.url", picture_bytes(url, f"{at}.image_url.url")))
        else:
            raise ChatError(
                f"{at}: part type {kind!r:.40} is not served; send text or image_url parts",
                f"{at}.type",
            )
    return "".join(texts), pictures


def picture_bytes(url: str, param: str) -> bytes:
    """The picture a ``data:image/<format>;base64,...`` URL holds.

    Raises:
        ChatError: not a data URL (remote pictures are not fetched), not base64, a MIME
            type that is no accepted picture format, or bytes of another format than it
            declares. The message never echoes the data.
    """
    if not url.startswith("data:"):
        raise ChatError(
            "only data: URLs are served (data:image/png;base64,...); this server does not "
            "fetch remote pictures",
            param,
        )
    header, comma, payload = url.partition(",")
    mime = header[5:].split(";")[0].strip().lower()
    if not comma or not header.endswith(";base64"):
        raise ChatError("the data URL must be base64 encoded (data:<type>;base64,<data>)", param)
    if mime not in MAGIC:
        accepted = ", ".join(sorted({m for m in MAGIC if m != "image/jpg"}))
        raise ChatError(f"pictures of type {mime!r:.40} are not accepted; send {accepted}", param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ChatError("the data URL does not hold valid base64", param) from None
    if not data.startswith(MAGIC[mime]):
        raise ChatError(f"the data URL declares {mime} but its bytes are not a {mime} file",
                        param)  # fmt: skip
    return data


def _typed(document: dict[str, Any], name: str, kind: type, default: Any, prefix: str = "") -> Any:
    """``document[name]`` of type ``kind`` (``default`` when absent or null)."""
    value = document.get(name)
    if value is None:
        return default
    if type(value) is not kind:
        raise ChatError(f"'{prefix}{name}' must be a {kind.__name__}, got {value!r:.40}",
                        prefix + name)  # fmt: skip
    return value
