"""Profile shapes as model.yaml writes them: a YAML list (``[1, 3, 224, 224]``) or trtexec's
text form (``"1x3x224x224"``), normalised to a tuple of positive ints."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

SHAPE_TEXT = re.compile(r"^\d+(x\d+)*$")


def parse_shape(value: object) -> tuple[int, ...]:
    """Normalise a profile shape to a tuple of positive ints.

    Accepts a YAML list (``[1, 80, 1]``) or trtexec's text form (``"1x80x1000"``,
    surrounding whitespace ignored); ``"scalar"`` or ``[]`` is a rank-0 shape.

    Raises:
        ValueError: naming the axis, for non-integers, ``-1``, ``0`` or malformed text.
    """
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "scalar"):
            return ()
        if not SHAPE_TEXT.match(text):
            raise ValueError(f"{value!r} is not a shape; write [1, 3, 224, 224] or '1x3x224x224'")
        value = [int(part) for part in text.split("x")]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{value!r} is not a shape; write [1, 3, 224, 224] or '1x3x224x224'")
    dims: list[int] = []
    for axis, dim in enumerate(value):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            shown = (
                str(dim).lower() if isinstance(dim, bool) else "null" if dim is None else repr(dim)
            )
            raise ValueError(
                f"axis {axis}: {shown} is not a positive integer; profile shapes "
                "are concrete sizes (dynamic dims are given by min/opt/max)"
            )
        dims.append(dim)
    return tuple(dims)


ProfileShape = Annotated[
    tuple[int, ...],
    BeforeValidator(parse_shape),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "array", "items": {"type": "integer", "minimum": 1}},
                {"type": "string", "pattern": r"^\s*(\d+(x\d+)*|scalar)\s*$"},
            ]
        }
    ),
]
