"""Server logging to stderr: plain text or JSON lines (``MMAAS_LOG_FORMAT``).

A JSON line holds ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` and any
of :data:`FIELDS` passed as ``extra=`` (e.g. ``request_id``, ``status``, ``duration_ms``),
so a log pipeline can follow one request. Text lines append those fields as ``key=value``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

FIELDS = ("request_id", "model", "status", "duration_ms", "peer")


class JsonFormatter(logging.Formatter):
    """One JSON object per record (JSON lines)."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` with its :data:`FIELDS` and, if any, the traceback text."""
        line = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({key: getattr(record, key) for key in FIELDS if hasattr(record, key)})
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line)


class TextFormatter(logging.Formatter):
    """``time level message key=value...``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` and append its :data:`FIELDS` as ``key=value``."""
        extra = " ".join(f"{key}={getattr(record, key)}" for key in FIELDS if hasattr(record, key))
        text = super().format(record)
        return f"{text} {extra}" if extra else text


def configure(log_format: str, level: str) -> None:
    """Send the ``mmaas`` loggers to stderr in ``log_format`` (``text``/``json``) at
    ``level`` (``debug``, ``info``, ``warning``, ``error``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logger = logging.getLogger("mmaas")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
