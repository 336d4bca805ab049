"""The kinds of value a runtime setting takes (rows of :mod:`mmaas.core.runtime_settings`).

A :class:`Kind` holds the rules for one type of value: how the text of an ``MMAAS_*``
variable is parsed (:meth:`Kind.parse`), how a value is checked against its limits whichever
side it came from (:meth:`Kind.check`), how a value is written back as the text of a
variable (:meth:`Kind.format`), and what the docs and the JSON Schema say it takes. The
kinds with numeric limits are in :mod:`mmaas.core.setting_numbers`.

One message per mistake: :meth:`Kind.check` raises :class:`SettingValueError` with the same
text for a value from model.yaml and for the same value from the environment, and each side
puts its own location in front: ``MMAAS_INSTANCE_COUNT: <text>`` from the server,
``model.yaml:7:19: runtime.instance_count: <text>`` from the spec. Standard library only:
the runtime image has no pydantic, and the CLI's ``--help`` imports none.
"""

from __future__ import annotations

import ipaddress
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SettingValueError(ValueError):
    """A value a setting does not take; ``str()`` is the whole message, without a location
    (each side adds its own: the variable, or the model.yaml key path)."""


class Kind(ABC, Generic[T]):
    """The rules for one type of setting value (``T``: the Python type of a checked value).

    Attributes:
        unit: the unit of a value (``bytes``, ``ms``, ``s``...); ``""`` for none.
    """

    unit: str = ""

    @property
    @abstractmethod
    def expects(self) -> str:
        """What the setting takes, with its limits, as the end of a sentence
        (``a whole number from 1 to 64``); used in messages and in the docs."""

    @abstractmethod
    def parse(self, raw: str) -> T:
        """The checked value of a variable's text ``raw`` (stripped, not empty).

        Raises:
            SettingValueError: ``raw`` is not a value of this kind, or is out of its limits.
        """

    def check(self, value: T) -> T:
        """``value`` itself, when it lies within this kind's limits.

        Raises:
            SettingValueError: it does not: ``<value> is out of range; write <expects>``.
        """
        return value

    def format(self, value: T) -> str:
        """``value`` as the text of a variable (what :meth:`parse` reads back)."""
        return str(value)

    def json_schema(self, schema: dict[str, Any]) -> None:
        """Add this kind's limits to a field's JSON Schema ``schema`` (in place)."""

    def _out_of_range(self, shown: object) -> SettingValueError:
        return SettingValueError(f"{shown} is out of range; write {self.expects}")


@dataclass(frozen=True)
class Boolean(Kind[bool]):
    """``true``/``false`` (also ``1``/``0``, any case, in a variable)."""

    @property
    def expects(self) -> str:
        """``true or false``."""
        return "true or false"

    def parse(self, raw: str) -> bool:
        """``true``/``1`` -> True, ``false``/``0`` -> False."""
        lowered = raw.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise SettingValueError(f"{raw!r} is not a boolean; write true or false")

    def format(self, value: bool) -> str:
        """``true`` or ``false``."""
        return str(value).lower()


@dataclass(frozen=True)
class Choice(Kind[str]):
    """One of ``choices`` (lowercase; a variable's text is lowercased first)."""

    choices: tuple[str, ...]

    @property
    def expects(self) -> str:
        """``one of a, b, c``."""
        return f"one of {', '.join(self.choices)}"

    def parse(self, raw: str) -> str:
        """``raw`` lowercased, checked."""
        return self.check(raw.lower())

    def check(self, value: str) -> str:
        """``value`` when it is one of the choices."""
        if value not in self.choices:
            raise SettingValueError(f"{value!r} is not allowed; write {self.expects}")
        return value

    def json_schema(self, schema: dict[str, Any]) -> None:
        """``enum``."""
        schema["enum"] = list(self.choices)


@dataclass(frozen=True)
class Text(Kind[str]):
    """Any text (an address, PEM text or a list of files...)."""

    @property
    def expects(self) -> str:
        """``text``."""
        return "text"

    def parse(self, raw: str) -> str:
        """``raw`` itself."""
        return raw


@dataclass(frozen=True)
class FilePath(Kind[Path]):
    """A path; ``must_exist``: of an existing file (checked when the setting is read)."""

    must_exist: bool = False

    @property
    def expects(self) -> str:
        """``the path of a file`` or ``a path``."""
        return "the path of an existing file" if self.must_exist else "a path"

    def parse(self, raw: str) -> Path:
        """``Path(raw)``, which names an existing file when ``must_exist``."""
        path = Path(raw)
        if self.must_exist and not path.is_file():
            raise SettingValueError(f"{raw!r}: no such file; write {self.expects}")
        return path


@dataclass(frozen=True)
class EnginePin(Kind[str]):
    """``blake3:<64 lowercase hex digits>``: the engine (or engine set) digest the
    manifest records."""

    @property
    def expects(self) -> str:
        """``blake3:<64 lowercase hex digits>...``."""
        return "blake3:<64 lowercase hex digits>, as manifest.json's engine.blake3"

    def parse(self, raw: str) -> str:
        """``raw`` when it has the pin's form."""
        if not re.fullmatch(r"blake3:[0-9a-f]{64}", raw):
            raise SettingValueError(f"{raw!r} is not an engine pin; write {self.expects}")
        return raw


@dataclass(frozen=True)
class Optional(Kind["T | None"], Generic[T]):
    """``kind``'s values, or None (unset: the server's own choice, see the row's doc)."""

    kind: Kind[T]
    unit: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "unit", self.kind.unit)

    @property
    def expects(self) -> str:
        """The inner kind's."""
        return self.kind.expects

    def parse(self, raw: str) -> T | None:
        """The inner kind's value of ``raw``."""
        return self.kind.parse(raw)

    def check(self, value: T | None) -> T | None:
        """None, or the inner kind's check."""
        return None if value is None else self.kind.check(value)

    def format(self, value: T | None) -> str:
        """The inner kind's text; ``""`` for None (no variable is written)."""
        return "" if value is None else self.kind.format(value)

    def json_schema(self, schema: dict[str, Any]) -> None:
        """The inner kind's limits."""
        self.kind.json_schema(schema)


@dataclass(frozen=True)
class Networks(Kind[tuple[str, ...]]):
    """IP networks (``10.0.0.0/8``) or addresses (``127.0.0.1``), comma-separated in a
    variable; read as their normalised network text (``ipaddress.ip_network``, host bits
    cleared)."""

    @property
    def expects(self) -> str:
        """``IP networks or addresses, comma-separated``."""
        return "IP networks or addresses, comma-separated (e.g. 10.0.0.0/8,fd00::/8)"

    def parse(self, raw: str) -> tuple[str, ...]:
        """The networks of ``raw``, normalised, each once, in the given order."""
        return self.check(tuple(part.strip() for part in raw.split(",") if part.strip()))

    def check(self, value: tuple[str, ...]) -> tuple[str, ...]:
        """``value`` with each network normalised, when each is one."""
        out: list[str] = []
        for text in value:
            try:
                network = str(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise SettingValueError(
                    f"{text!r} is not an IP network; write {self.expects}"
                ) from None
            if network not in out:
                out.append(network)
        return tuple(out)

    def format(self, value: tuple[str, ...]) -> str:
        """``10.0.0.0/8,fd00::/8``."""
        return ",".join(value)
