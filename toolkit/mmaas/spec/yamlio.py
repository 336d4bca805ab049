"""Load YAML into plain Python with a (line, column) for every key path.

Built on PyYAML's safe composer (``yaml.compose`` with a :class:`yaml.SafeLoader`
subclass); the node tree is turned into data here, so that:

* plain scalars resolve by the YAML 1.2 core schema (yaml.org/spec/1.2.2, 10.3.2):
  ``true``/``false`` are booleans, ``null``/``~``/empty are None, decimal, ``0o`` and
  ``0x`` integers and floats are numbers, and everything else (``no``, ``yes``, ``on``,
  ``off``, ``y``, ``n``, ``2024-01-01``) stays a string. Quoted scalars are always strings;
* a key given twice in one mapping is an error citing both lines (PyYAML silently keeps the
  last one, yaml/pyyaml#165);
* scanner and parser errors (a tab, an unclosed quote) become one line with file, line and
  column, never a traceback.

Errors are :class:`~mmaas.core.errors.SpecError` carrying :class:`~mmaas.core.errors.SpecProblem`.
Key paths are tuples of mapping keys (str) and sequence indexes (int), e.g.
``("inputs", 0, "max", 2)``; :func:`format_key_path` prints it as ``inputs[0].max[2]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from mmaas.core.errors import SpecError, SpecProblem

KeyPath = tuple[str | int, ...]
Position = tuple[int, int]

_TAG = "tag:yaml.org,2002:"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class _CoreLoader(yaml.SafeLoader):
    """SafeLoader whose implicit resolvers are the YAML 1.2 core schema's."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}  # noqa: RUF012


_CORE_RESOLVERS = [
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+.0123456789"),
    ),
]
for _name, _pattern, _first in _CORE_RESOLVERS:
    _CoreLoader.add_implicit_resolver(_TAG + _name, re.compile(_pattern), _first)


@dataclass(frozen=True)
class YamlDocument:
    """A loaded YAML document.

    Attributes:
        data: plain Python (dict, list, str, int, float, bool, None).
        positions: key path -> 1-based (line, column): of the value for scalar values and
            sequence items, of the key for mappings and sequences held under a key.
        plain_text: key path -> the source text of every *plain* (unquoted) scalar value,
            so messages can show what the user wrote (``~`` vs ``null``).
        file: the file name used in messages.
        prefix: the key path of ``data`` in the whole document (a :meth:`section`);
            ``positions`` and ``plain_text`` stay the whole document's.
    """

    data: Any
    positions: Mapping[KeyPath, Position]
    plain_text: Mapping[KeyPath, str]
    file: str
    prefix: KeyPath = ()

    def position(self, path: KeyPath) -> Position | None:
        """Position of ``path`` (relative to :attr:`prefix`) or, when it has none (a
        missing key), of its nearest parent."""
        full = self.prefix + path
        for end in range(len(full), -1, -1):
            if full[:end] in self.positions:
                return self.positions[full[:end]]
        return None

    def problem(self, path: KeyPath, message: str) -> SpecProblem:
        """A :class:`SpecProblem` at ``path`` (relative to :attr:`prefix`; the message
        shows the whole key path), located by :meth:`position`."""
        line, column = self.position(path) or (None, None)
        return SpecProblem(self.file, format_key_path(self.prefix + path), message, line, column)

    def section(self, path: KeyPath) -> YamlDocument:
        """The part of the document at ``path`` (e.g. ``("engines", "det")``), whose
        problems carry their whole key path (``engines.det.inputs[0].max``)."""
        data = self.data
        for part in path:
            data = data[part]
        return replace(self, data=data, prefix=self.prefix + path)


def format_key_path(path: KeyPath) -> str:
    """``("inputs", 0, "max", 2)`` -> ``inputs[0].max[2]``; odd keys are bracketed and
    quoted: ``("image", "labels", "org.a")`` -> ``image.labels["org.a"]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text


def load_yaml(text: str, file: str) -> YamlDocument:
    """Parse one YAML document from ``text``; ``file`` names it in messages.

    Returns an empty document (``data`` None) for empty text.

    Raises:
        SpecError: a syntax error (one problem with line and column), or every duplicate
            key, unsupported tag and recursive alias in the document.
    """
    try:
        root = yaml.compose(text, Loader=_CoreLoader)
    except yaml.MarkedYAMLError as exc:
        raise SpecError([_syntax_problem(exc, file)]) from None
    walker = _Walker(file)
    data = None if root is None else walker.walk(root, ())
    if walker.problems:
        raise SpecError(walker.problems)
    return YamlDocument(data, walker.positions, walker.plain_text, file)


def _syntax_problem(exc: yaml.MarkedYAMLError, file: str) -> SpecProblem:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    if "'\\t'" in problem:
        problem = (
            "a tab character; YAML allows only spaces for indentation and (in this "
            "reader) before comments: replace the tab with spaces"
        )
    elif exc.context and exc.problem:
        problem = f"{exc.context}: {problem}"
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    return SpecProblem(file, "", f"invalid YAML: {problem}", line, column)


class _Walker:
    """Turns a composed node tree into data, recording positions and problems."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[KeyPath, Position] = {}
        self.plain_text: dict[KeyPath, str] = {}
        self.problems: list[SpecProblem] = []
        self._active: set[int] = set()

    def walk(self, node: yaml.Node, path: KeyPath) -> Any:
        self.positions.setdefault(path, _mark(node))
        if id(node) in self._active:
            self._problem(node, path, "an alias refers to its own anchor (a cycle)")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                return self._sequence(node, path)
            assert isinstance(node, yaml.ScalarNode)
            return self._scalar(node, path)
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any] | None:
        if node.tag != _TAG + "map":
            self._problem(node, path, f"unsupported tag {node.tag}; write a plain mapping")
            return None
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, path, "a key must be plain text, not a list or mapping")
                continue
            key = key_node.value
            child = (*path, key)
            if key in first_line:
                self._problem(
                    key_node,
                    child,
                    f"duplicate key {key!r}: first at line "
                    f"{first_line[key]}, again at line {key_node.start_mark.line + 1}; "
                    "keep only one",
                )
                continue
            first_line[key] = key_node.start_mark.line + 1
            anchor = value_node if isinstance(value_node, yaml.ScalarNode) else key_node
            self.positions[child] = _mark(anchor)
            result[key] = self.walk(value_node, child)
        return result

    def _sequence(self, node: yaml.SequenceNode, path: KeyPath) -> list[Any] | None:
        if node.tag != _TAG + "seq":
            self._problem(node, path, f"unsupported tag {node.tag}; write a plain list")
            return None
        return [self.walk(item, (*path, index)) for index, item in enumerate(node.value)]

    def _scalar(self, node: yaml.ScalarNode, path: KeyPath) -> Any:
        value: str = node.value
        if node.style is None:
            self.plain_text[path] = value
        kind = node.tag.removeprefix(_TAG)
        converter = _CONVERTERS.get(kind)
        if converter is None:
            self._problem(node, path, f"unsupported tag {node.tag}; remove it")
            return None
        try:
            return converter(value)
        except ValueError:
            self._problem(node, path, f"{value!r} is not a valid !!{kind}")
            return None

    def _problem(self, node: yaml.Node, path: KeyPath, message: str) -> None:
        line, column = _mark(node)
        self.problems.append(SpecProblem(self.file, format_key_path(path), message, line, column))


def _mark(node: yaml.Node) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _to_null(value: str) -> None:
    if value not in ("", "~", "null", "Null", "NULL"):
        raise ValueError(value)


def _to_bool(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(value)
    return value.lower() == "true"


def _to_int(value: str) -> int:
    for prefix, base in (("0o", 8), ("0x", 16)):
        if value.startswith(prefix):
            return int(value[2:], base)
    return int(value, 10)


def _to_float(value: str) -> float:
    lowered = value.lower()
    if lowered.lstrip("+-") == ".inf":
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    return float(value)


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "null": _to_null,
    "bool": _to_bool,
    "int": _to_int,
    "float": _to_float,
}
