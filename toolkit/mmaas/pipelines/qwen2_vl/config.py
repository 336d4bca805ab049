"""runtime.json: what the qwen2-vl runtime needs from the checkpoint besides the two engines,
as one typed, frozen model that the converter writes (:meth:`RuntimeConfig.write`) and the
spec check and the runtime read (:meth:`RuntimeConfig.read`). Dataclasses and json only:
the runtime image has no pydantic.

Schema 2, keys in this order (the file is ``json.dumps(indent=2)`` plus a newline):

| key | type | what |
| --- | --- | --- |
| ``schema`` | int | 2; another number is refused (re-convert) |
| ``files`` | {name: sha256 hex} | the two graphs, embed_tokens.npy, tokenizer.json as converted |
| ``image`` | :class:`ImageSettings` | the image processor's settings (preprocessor_config.json) |
| ``tokens`` | :class:`Tokens` | special-token ids, stop ids, tokens refused in user text |
| ``prompt`` | :class:`ChatTemplate` | the chat template's turn structure |
| ``prompt_proved_images`` | int | it was proved equal to the template for 0..n pictures |
| ``generation`` | :class:`Generation` | generation_config.json's repetition penalty |
| ``language`` | :class:`LanguageDims` | the language engine's dimensions |
| ``exporter`` | str | sha256 of the converter's code (``mmaas convert --if-stale``) |

Every key is required and no other is allowed; integers are JSON integers, floats JSON
numbers. A file that breaks a rule is refused naming the file, the field and the rule.
Limits that come from the engines' optimization profiles (context, images, patches, decode
batch) are not here: the runtime reads them from the built engines' manifest entries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

from mmaas.core.errors import IntegrityError
from mmaas.core.files import atomic_write_text

SCHEMA = 2
MAX_STOPS = 4  # stop strings per request (OpenAI's limit): the served ``stop`` input's max
FIX = "convert the checkpoint again (`mmaas convert qwen2-vl OUT_DIR`) and rebuild"
T = TypeVar("T")
Turn = tuple[str, Sequence["str | None"]]  # (role, parts): a text, or None for a picture
# JSON's names of the types a field may hold, for errors
NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
         list: "a list", dict: "an object", type(None): "null"}  # fmt: skip


@dataclass(frozen=True)
class ImageSettings:
    """The image processor's settings; pixels are counted after the resize, ``resample`` is
    a ``PIL.Image.Resampling`` value (3 = bicubic)."""

    patch_size: int
    temporal_patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    resample: int
    rescale_factor: float
    image_mean: tuple[float, float, float]
    image_std: tuple[float, float, float]

    @property
    def patch_features(self) -> int:
        """Values per patch: 3 channels x frames x patch^2 (1176 for Qwen2-VL)."""
        return 3 * self.temporal_patch_size * self.patch_size**2


@dataclass(frozen=True)
class Tokens:
    """Token ids: the image placeholder, the vision delimiters, the stop ids (generation
    config's ``eos_token_id`` list), padding; and the strings refused in user text (vision
    placeholders, which would put image tokens where no image is)."""

    image: int
    vision_start: int
    vision_end: int
    eos: tuple[int, ...]
    pad: int
    refused_in_text: tuple[str, ...]


@dataclass(frozen=True)
class ChatTemplate:
    """The checkpoint's chat template as its turn structure (Qwen2-VL's, ChatML), which
    renders a conversation as ``apply_chat_template(messages, add_generation_prompt=True)``
    does:

    * each message is ``turn_start + role + role_end + content + turn_end``, its content
      the text parts and ``image`` per picture, in the order given (a string content is
      one text part);
    * when the first message's role is not ``system``, a system turn holding
      ``default_system`` comes first;
    * then ``generation`` (the assistant turn the answer continues).

    ``roles``: the roles the template takes (others are refused)."""

    roles: tuple[str, ...]
    turn_start: str
    role_end: str
    turn_end: str
    default_system: str
    image: str
    generation: str

    def render(self, turns: Sequence[Turn]) -> str:
        """The prompt text of ``turns``: (role, parts), each part a text or None for a
        picture (rendered as :attr:`image`)."""
        out = []
        if not turns or turns[0][0] != "system":
            out.append(self.turn_start + "system" + self.role_end + self.default_system)
            out.append(self.turn_end)
        for role, parts in turns:
            out.append(self.turn_start + role + self.role_end)
            out.extend(self.image if part is None else part for part in parts)
            out.append(self.turn_end)
        out.append(self.generation)
        return "".join(out)


@dataclass(frozen=True)
class Generation:
    """generation_config.json's ``repetition_penalty`` (1.0 = off), applied under greedy too."""

    repetition_penalty: float


@dataclass(frozen=True)
class LanguageDims:
    """The language engine's layers, key-value heads, head width, hidden width, vocabulary."""

    num_layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int


@dataclass(frozen=True)
class RuntimeConfig:
    """runtime.json (see the module docstring for the keys and rules)."""

    schema: int
    files: dict[str, str]
    image: ImageSettings
    tokens: Tokens
    prompt: ChatTemplate
    prompt_proved_images: int
    generation: Generation
    language: LanguageDims
    exporter: str

    @property
    def stop_ids(self) -> frozenset[int]:
        """Ids that end an answer."""
        return frozenset(self.tokens.eos)

    def to_json(self) -> str:
        """The file's text: JSON, indent 2, keys in field order, a final newline."""
        return json.dumps(asdict(self), indent=2) + "\n"

    def write(self, path: Path) -> None:
        """Check the text by the reader's rules, then write it atomically (temp file +
        rename), so the converter never writes a file the runtime would refuse.

        Raises:
            IntegrityError: a field breaks its rule (e.g. a null token id), naming it.
        """
        text = self.to_json()
        parse(text, path)
        atomic_write_text(path, text)

    @classmethod
    def read(cls, path: Path) -> RuntimeConfig:
        """Read and check runtime.json.

        Raises:
            IntegrityError: unreadable, not JSON, another schema, or a field missing, unknown
                or of the wrong type; the message names the file and the field.
        """
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise IntegrityError(f"{path}: cannot read runtime.json ({exc}); {FIX}") from exc
        return parse(text, path)


def parse(text: str, path: Path) -> RuntimeConfig:
    """runtime.json's text -> RuntimeConfig (``path`` names the file in errors).

    Raises:
        IntegrityError: see :meth:`RuntimeConfig.read`.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise IntegrityError(f"{path}: not JSON ({exc}); {FIX}") from exc
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise IntegrityError(
            f"{path}: field 'schema': {schema!r}, this mmaas reads schema {SCHEMA}; {FIX}"
        )
    try:
        return _build(RuntimeConfig, data, "")
    except _FieldError as exc:
        where, why = exc.args
        raise IntegrityError(f"{path}: field {where!r}: {why}; {FIX}") from None


class _FieldError(Exception):
    """(dotted field path, what is wrong) of the first field that breaks its rule."""


def _build(cls: type[T], data: Any, where: str) -> T:
    """An instance of the dataclass ``cls`` from the JSON object ``data`` found at the
    field path ``where`` ("" for the file itself)."""
    if not isinstance(data, dict):
        raise _FieldError(where or "(the file)", f"expected an object, got {_kind(data)}")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = [key for key in data if key not in names]
    if unknown:
        raise _FieldError(_at(where, unknown[0]), f"unknown field; expected {', '.join(names)}")
    missing = [name for name in names if name not in data]
    if missing:
        raise _FieldError(_at(where, missing[0]), "missing")
    hints = get_type_hints(cls)
    return cls(**{name: _value(hints[name], data[name], _at(where, name)) for name in names})


def _at(where: str, name: str) -> str:
    """The dotted path of field ``name`` of the object at ``where``."""
    return f"{where}.{name}" if where else name


def _value(kind: Any, value: Any, where: str) -> Any:
    """``value`` checked against the field type ``kind`` (int, float, str, a dataclass,
    ``tuple[X, ...]``, a fixed tuple, ``dict[str, str]``)."""
    if isinstance(kind, type) and is_dataclass(kind):
        return _build(kind, value, where)
    origin, args = get_origin(kind), get_args(kind)
    if origin is tuple:
        if not isinstance(value, list):
            raise _FieldError(where, f"expected a list, got {_kind(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise _FieldError(where, f"expected {len(args)} items, got {len(value)}")
        return tuple(
            _value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True))
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise _FieldError(where, f"expected an object, got {_kind(value)}")
        return {key: _value(args[1], item, _at(where, key)) for key, item in value.items()}
    ok = {int: (int,), float: (int, float), str: (str,)}[kind]
    if isinstance(value, bool) or not isinstance(value, ok):
        raise _FieldError(where, f"expected {NAMES[kind]}, got {_kind(value)} {value!r}")
    return kind(value)


def _kind(value: Any) -> str:
    """The JSON name of a value's type."""
    return NAMES.get(type(value), type(value).__name__)
