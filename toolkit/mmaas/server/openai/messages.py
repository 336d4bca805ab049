"""OpenAI's ``messages`` -> the generation interface's ``messages`` input (the conversation in
transformers' chat format, UTF-8 JSON: :mod:`mmaas.pipelines.qwen2_vl.runtime.conversation`)
and the URLs of its pictures, in order. Each refusal is a ChatError (400) with ``param`` at
the element (``messages[2].content[0].image_url.url``).

Rules:

* ``messages``: a non-empty list; each message an object with ``role`` and ``content``
  (``name`` is accepted and ignored; ``refusal``, ``tool_calls``, ``function_call``,
  ``audio``, ``annotations``, as the SDK echoes an earlier answer, only null or empty).
* Roles: ``system``, ``user``, ``assistant`` as the chat template takes them;
  ``developer`` is a ``system`` message (OpenAI: developer messages replace system
  messages); ``tool`` and ``function`` are refused (tools are not served). Turns are
  rendered in the order given, any number, any order (two assistant turns in a row too),
  and the answer is always a new assistant turn.
* ``content``: a string, or a non-empty list of parts: ``text`` (``text`` a string) in every
  role, ``image_url`` (``image_url.url`` a ``data:`` or ``http(s)`` URL; ``detail`` is
  accepted and ignored: the pipeline sizes pictures by its own rule) in ``user`` messages
  only; any other part type is refused. Parts keep their order: a picture goes where its
  part is.
"""

from __future__ import annotations

from typing import Any

import orjson

from mmaas.server.openai.errors import ChatError
from mmaas.server.openai.pictures import SCHEMES, url_scheme

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
REFUSED_ROLES = ("tool", "function")
ECHOED = ("refusal", "tool_calls", "function_call", "audio", "annotations")  # null/empty only
DETAILS = ("auto", "low", "high")


def conversation(messages: Any) -> tuple[bytes, list[tuple[str, str]]]:
    """(the ``messages`` input's JSON, [(param, URL) of each picture]).

    Raises:
        ChatError: a rule of the module docstring is broken.
    """
    if not isinstance(messages, list) or not messages:
        raise ChatError("'messages' must be a non-empty list of messages", "messages")
    turns: list[dict[str, Any]] = []
    pictures: list[tuple[str, str]] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ChatError(f"{where} must be an object with role and content", where)
        role = _role(message.get("role"), where)
        for key in message:
            if key in ECHOED and message[key] not in (None, [], ""):
                raise ChatError(f"{where}.{key}: not served (send the assistant's text only)",
                                f"{where}.{key}")  # fmt: skip
            if key not in ("role", "content", "name", *ECHOED):
                raise ChatError(f"{where}: unrecognized message field {key!r:.40}",
                                f"{where}.{key}")  # fmt: skip
        content = message.get("content")
        if isinstance(content, str):
            turns.append({"role": role, "content": content})
            continue
        if not isinstance(content, list) or not content:
            raise ChatError(f"{where}.content must be a string or a non-empty list of parts",
                            f"{where}.content")  # fmt: skip
        parts = [_part(part, f"{where}.content[{i}]", role, pictures)
                 for i, part in enumerate(content)]  # fmt: skip
        turns.append({"role": role, "content": parts})
    return orjson.dumps(turns), pictures


def _role(role: Any, where: str) -> str:
    """The template's role of an OpenAI role."""
    if role in REFUSED_ROLES:
        raise ChatError(
            f"{where}: {role} messages are not served (this server does not call tools)",
            f"{where}.role",
        )
    if not isinstance(role, str) or role not in ROLES:
        served = ", ".join(ROLES)
        raise ChatError(f"{where}.role: {role!r:.40} is not one of {served}", f"{where}.role")
    return ROLES[role]


def _part(part: Any, at: str, role: str, pictures: list[tuple[str, str]]) -> dict[str, str]:
    """One content part as the runtime's part; a picture's URL goes to ``pictures``."""
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise ChatError(f"{at}.text must be a string, got {text!r:.40}", f"{at}.text")
        return {"type": "text", "text": text}
    if kind == "image_url" and role == "user":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else None
        if not isinstance(url, str):
            raise ChatError(f"{at}.image_url.url must be a URL string", f"{at}.image_url.url")
        detail = image.get("detail", "auto")
        if detail not in DETAILS:
            raise ChatError(f"{at}.image_url.detail: {detail!r:.20} is not one of "
                            f"{', '.join(DETAILS)}", f"{at}.image_url.detail")  # fmt: skip
        if url_scheme(url) not in SCHEMES:
            raise ChatError("a picture URL must be a data: URL (data:image/png;base64,...) "
                            "or an http(s) URL", f"{at}.image_url.url")  # fmt: skip
        pictures.append((f"{at}.image_url.url", url))
        return {"type": "image"}
    served = "text or image_url parts" if role == "user" else "text parts"
    raise ChatError(f"{at}: part type {kind!r:.40} is not served in {role} messages; "
                    f"send {served}", f"{at}.type")  # fmt: skip
