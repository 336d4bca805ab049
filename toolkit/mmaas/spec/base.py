"""The base of every model.yaml section's typed model: frozen, unknown keys forbidden,
strict types (``version: 1.10`` is a number, not the string "1.10", and is refused)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Frozen, ``extra="forbid"``, ``strict=True``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
