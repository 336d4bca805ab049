"""A request's conversation: the ``messages`` input, or ``text_input`` as one user turn.

``messages`` (BYTES [1], UTF-8 JSON) is a list of chat messages in transformers' chat
format, the pictures of the ``image`` input placed by its image parts, in order::

    [{"role": "system", "content": "You answer in one word."},
     {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]},
     {"role": "assistant", "content": "A rocket."},
     {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image"}]}]

Rules (each broken one is INVALID_ARGUMENT naming ``input 'messages'`` and the element):
JSON nested no deeper than the decoder takes (a conversation is 4 levels deep); every
string valid Unicode (no lone UTF-16 surrogate, which JSON's ``\\ud800`` escapes can
spell); at least one message; each an object of ``role`` (a string: the served template's roles,
checked by :class:`~.prompt.PromptBuilder`) and ``content`` (a string, or a list of parts:
``{"type": "text", "text": <string>}`` or ``{"type": "image"}``); no other keys. The
image parts must number the ``image`` input's elements. ``text_input`` (the KServe
interface's question) is one user turn: its pictures, then its text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mmaas.core.errors import InputError
from mmaas.pipelines.qwen2_vl.config import Turn


@dataclass(frozen=True)
class Conversation:
    """The turns (role, parts: a text, or None for a picture) and the input they came from
    (``text_input`` or ``messages``), which errors name."""

    turns: tuple[Turn, ...]
    source: str

    @property
    def images(self) -> int:
        """The pictures the turns place."""
        return sum(part is None for _, parts in self.turns for part in parts)


def one_turn(text: str, images: int) -> Conversation:
    """``text_input`` with ``images`` pictures: one user turn, the pictures first."""
    return Conversation((("user", (*[None] * images, text)),), "text_input")


def read_messages(raw: object) -> Conversation:
    """The ``messages`` input's element (bytes of UTF-8 JSON) as a conversation.

    Raises:
        InputError: not UTF-8 JSON, or a rule of the module docstring broken, naming the
            element (``messages[1].content[0].text``).
    """
    try:
        document = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _error("", f"not UTF-8 JSON ({exc})") from None
    except RecursionError:
        raise _error(
            "",
            "JSON nested too deeply to decode; a conversation is a list of "
            "messages whose content is a string or a list of parts (4 levels)",
        ) from None
    if not isinstance(document, list) or not document:
        raise _error("", "must be a non-empty JSON list of messages")
    return Conversation(tuple(_turn(m, f"messages[{i}]") for i, m in enumerate(document)),
                        "messages")  # fmt: skip


def unicode_text(where: str, text: str) -> str:
    """``text`` when it is valid Unicode, i.e. encodable as UTF-8 (what the tokenizer takes).

    Raises:
        InputError: ``text`` holds a lone UTF-16 surrogate (U+D800..U+DFFF), naming
            ``where``, the code point and the fix.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{where}: contains a lone UTF-16 surrogate (U+{ord(text[exc.start]):04X}) at "
            f"character {exc.start}, which is not Unicode text; send a surrogate only as "
            "half of a pair (\\ud83d\\ude00), or the character itself"
        ) from None
    return text


def _turn(message: Any, where: str) -> Turn:
    if not isinstance(message, dict):
        raise _error(where, "must be an object with role and content")
    for key in message:
        unicode_text(f"input 'messages': {where}: a key", key)
    unknown = sorted(set(message) - {"role", "content"})
    if unknown:
        raise _error(f"{where}.{unknown[0]}", "unknown key; a message has role and content")
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str):
        raise _error(f"{where}.role", f"must be a string, got {role!r:.40}")
    unicode_text(f"input 'messages': {where}.role", role)
    if isinstance(content, str):
        return role, (unicode_text(f"input 'messages': {where}.content", content),)
    if not isinstance(content, list):
        raise _error(f"{where}.content", "must be a string or a list of parts")
    parts: list[str | None] = []
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image" and set(part) == {"type"}:
            parts.append(None)
        elif kind == "text" and set(part) == {"type", "text"} and isinstance(part["text"], str):
            parts.append(unicode_text(f"input 'messages': {at}.text", part["text"]))
        else:
            raise _error(at, 'must be {"type": "text", "text": <string>} or {"type": "image"}')
    return role, tuple(parts)


def _error(where: str, what: str) -> InputError:
    return InputError(f"input 'messages': {where + ': ' if where else ''}{what}")
