"""Values for the rows of the runtime settings table, made from each row's kind, so that a
new row is covered without a new test: values out of its limits (the spec and the server
must refuse them alike) and a value within them other than the default (the image's ENV
lines must carry it to the server)."""

from __future__ import annotations

from typing import Any

from mmaas.core.runtime_settings import SETTINGS, Setting
from mmaas.core.setting_kinds import Boolean, Kind, Optional
from mmaas.core.setting_numbers import Integer, Seconds, Sizes

KEYED = tuple(setting for setting in SETTINGS if setting.key is not None)  # model.yaml sets them
LIMITED = tuple(setting for setting in KEYED if not isinstance(setting.kind, Boolean))


def _inner(setting: Setting[Any]) -> Kind[Any]:
    return setting.kind.kind if isinstance(setting.kind, Optional) else setting.kind


def outside(setting: Setting[Any]) -> list[Any]:
    """Values just outside ``setting``'s limits, as model.yaml writes them (a list for
    :class:`Sizes`); none for a boolean, which has no limits."""
    kind = _inner(setting)
    if isinstance(kind, Integer):
        low = kind.minimum - 1
        values: list[Any] = [-1 if low == 0 and kind.zero else low]
        return values + ([kind.maximum + 1] if kind.maximum is not None else [])
    if isinstance(kind, Seconds):
        values = [float(kind.minimum) if kind.exclusive else kind.minimum - 1.0]
        return values + ([kind.maximum + 1.0] if kind.maximum is not None else [])
    if isinstance(kind, Sizes):
        return [[kind.minimum + 1, kind.minimum - 1]]
    if isinstance(kind, Boolean):
        return []
    raise AssertionError(f"{setting.env}: add out-of-limits values for {kind!r} here")


def other_value(setting: Setting[Any]) -> Any:
    """A value within ``setting``'s limits other than its default, as model.yaml writes
    it (True for a switch: its section given)."""
    kind = _inner(setting)
    if setting.switch or isinstance(kind, Boolean):
        return not setting.default
    if isinstance(kind, Integer):
        value = (setting.default or kind.minimum) + 1
        return value if kind.maximum is None or value <= kind.maximum else value - 2
    if isinstance(kind, Seconds):
        return setting.default + 0.5
    if isinstance(kind, Sizes):
        return [kind.minimum + 3, kind.minimum + 1]  # out of order: the server sorts them
    raise AssertionError(f"{setting.env}: add another value for {kind!r} here")


def runtime_data(values: dict[Setting[Any], Any]) -> dict[str, Any]:
    """``runtime:`` as model.yaml's data, each row of ``values`` at its key path (a switch
    that is on: its section, even empty)."""
    data: dict[str, Any] = {}
    for setting, value in values.items():
        assert setting.key is not None
        *sections, last = setting.key
        node = data
        for part in sections:
            node = node.setdefault(part, {})
        if setting.switch:
            if value:
                node.setdefault(last, {})
        else:
            node[last] = value
    return data
