"""Profile shapes as written in model.yaml: a value that is no size is named as YAML
spells it (``true``, ``null``), never as Python does."""

from __future__ import annotations

import re

import pytest

from mmaas.spec.shapes import parse_shape


@pytest.mark.parametrize(
    ("value", "shown"),
    [([1, True], "true"), ([1, False], "false"), ([1, None], "null"), ([1, [2]], "[2]"),
     ([1, 0], "0"), ([1, "a"], "'a'")],
)  # fmt: skip
def test_a_dim_that_is_no_size_is_named_in_yaml_words(value: list, shown: str) -> None:
    with pytest.raises(ValueError, match=rf"^axis 1: {re.escape(shown)} is not a positive integer"):
        parse_shape(value)
