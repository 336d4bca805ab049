"""The kinds of runtime setting value with numeric limits: whole numbers (ports, counts,
bytes, milliseconds...), seconds and lists of sizes. Each message says what was written and
what the setting takes, limits and unit included (see :mod:`mmaas.core.setting_kinds`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mmaas.core.setting_kinds import Kind, SettingValueError


@dataclass(frozen=True)
class Integer(Kind[int]):
    """A whole number in ``minimum..maximum`` (``maximum`` None: no upper limit); ``zero``
    set: 0 is taken too, and means that (``"to turn it off"``); ``noun``: what a value is,
    in messages (default: a whole number of ``unit``)."""

    minimum: int = 0
    maximum: int | None = None
    unit: str = ""
    zero: str = ""
    noun: str = ""

    @property
    def expects(self) -> str:
        """``<noun> from <min> to <max>`` (or ``<noun>, <min> or more``), then
        ``, or 0 <zero>``."""
        noun = self.noun or _NOUNS.get(self.unit, f"a whole number of {self.unit}")
        if self.maximum is None:
            limits = f"{noun}, {self.minimum} or more"
        else:
            limits = f"{noun} from {self.minimum} to {self.maximum}"
        return limits + (f", or 0 {self.zero}" if self.zero else "")

    def parse(self, raw: str) -> int:
        """``int(raw)``, checked."""
        try:
            value = int(raw)
        except ValueError:
            message = f"{raw!r} is not a whole number; write {self.expects}"
            raise SettingValueError(message) from None
        return self.check(value)

    def check(self, value: int) -> int:
        """``value`` when ``minimum <= value <= maximum`` (or 0 with ``zero``)."""
        if value == 0 and self.zero:
            return value
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            raise self._out_of_range(value)
        return value

    def json_schema(self, schema: dict[str, Any]) -> None:
        """``minimum`` (0 with ``zero``) and ``maximum``."""
        schema["minimum"] = 0 if self.zero else self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum


@dataclass(frozen=True)
class Seconds(Kind[float]):
    """A finite number of seconds, at least ``minimum`` (more than it when ``exclusive``)
    and at most ``maximum`` (None: no upper limit)."""

    minimum: float = 0.0
    maximum: float | None = None
    exclusive: bool = False
    unit: str = "s"

    @property
    def expects(self) -> str:
        """``a number of seconds from <min> to <max>`` or ``..., more than <min>``."""
        low = _number(self.minimum)
        if self.maximum is not None:
            return f"a number of seconds from {low} to {_number(self.maximum)}"
        return f"a number of seconds, {'more than' if self.exclusive else 'at least'} {low}"

    def parse(self, raw: str) -> float:
        """``float(raw)``, checked."""
        try:
            value = float(raw)
        except ValueError:
            raise SettingValueError(f"{raw!r} is not a number; write {self.expects}") from None
        return self.check(value)

    def check(self, value: float) -> float:
        """``value`` within the limits (NaN and infinities are out of range)."""
        low = value > self.minimum if self.exclusive else value >= self.minimum
        high = self.maximum is None or value <= self.maximum
        if not (math.isfinite(value) and low and high):
            raise self._out_of_range(_number(value))
        return value

    def format(self, value: float) -> str:
        """``25`` for 25.0, ``0.5`` for 0.5 (no trailing ``.0``)."""
        return _number(value)

    def json_schema(self, schema: dict[str, Any]) -> None:
        """``minimum`` (or ``exclusiveMinimum``) and ``maximum``."""
        schema["exclusiveMinimum" if self.exclusive else "minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum


@dataclass(frozen=True)
class Sizes(Kind[tuple[int, ...]]):
    """A list of whole numbers, each at least ``minimum``; in a variable, comma-separated
    (``4,8``) and read as ascending, each once. model.yaml writes a YAML list."""

    minimum: int = 1

    @property
    def expects(self) -> str:
        """``whole numbers, each <min> or more``."""
        return f"whole numbers, each {self.minimum} or more"

    def parse(self, raw: str) -> tuple[int, ...]:
        """The comma-separated numbers of ``raw``, checked, ascending, each once."""
        try:
            values = [int(part) for part in raw.split(",")]
        except ValueError:
            raise SettingValueError(
                f"{raw!r} is not a list of whole numbers; write them separated by commas, "
                f"e.g. 4,8 ({self.expects})"
            ) from None
        return tuple(sorted(set(self.check(tuple(values)))))

    def check(self, value: tuple[int, ...]) -> tuple[int, ...]:
        """``value`` (any sequence) when every number is at least ``minimum``."""
        for number in value:
            if number < self.minimum:
                raise self._out_of_range(number)
        return value

    def format(self, value: tuple[int, ...]) -> str:
        """``4,8``: in the given order."""
        return ",".join(map(str, value))

    def json_schema(self, schema: dict[str, Any]) -> None:
        """Each item's ``minimum``."""
        schema.setdefault("items", {})["minimum"] = self.minimum


_NOUNS = {
    "": "a whole number",
    "ms": "a whole number of milliseconds",
    "us": "a whole number of microseconds",
}


def _number(value: float) -> str:
    """``25`` for 25.0, ``0.5`` for 0.5."""
    return str(int(value)) if float(value).is_integer() else str(value)
