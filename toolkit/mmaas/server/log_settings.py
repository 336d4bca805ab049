"""Triton's logging and trace extensions (``docs/protocol/extension_logging.md``,
``extension_trace.md``), protocol-neutral:
read and change the server's log settings at run time (gRPC ``LogSettings``, HTTP
``/v2/logging``).

Honoured: ``log_info``, ``log_warning``, ``log_error`` (each level on or off on its own, as
Triton has them), ``log_verbose_level`` (> 0 = mmaas's debug lines: one per request) and
``log_format`` (mmaas's ``text`` or ``json``; Triton's ``default`` is ``text``). Refused by
name: ``log_file`` other than "" (mmaas logs to stderr, the container's log) and Triton's
``ISO8601`` format. Triton's own reply spells ``log_warnings``/``log_errors`` in its doc
example: both spellings are taken.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from mmaas.server import logs
from mmaas.server.status import InvalidArgument, Unsupported

Value = bool | int | str
LEVELS = {"log_info": logging.INFO, "log_warning": logging.WARNING, "log_error": logging.ERROR}
ALIASES = {"log_warnings": "log_warning", "log_errors": "log_error"}
FORMATS = {"default": "text", "text": "text", "json": "json"}


class LevelSwitch(logging.Filter):
    """Drops the records of the levels switched off (DEBUG = verbose, off at level 0)."""

    def __init__(self, level: str) -> None:
        super().__init__()
        rank = logging.getLevelName(level.upper())
        self.verbose = 1 if rank <= logging.DEBUG else 0
        self.enabled = {name: rank <= number for name, number in LEVELS.items()}

    def filter(self, record: logging.LogRecord) -> bool:
        """True when ``record``'s level is on."""
        if record.levelno < logging.INFO:
            return self.verbose > 0
        if record.levelno < logging.WARNING:
            return self.enabled["log_info"]
        if record.levelno < logging.ERROR:
            return self.enabled["log_warning"]
        return self.enabled["log_error"]


class LogSettings:
    """The ``mmaas`` logger's settings (``configure`` must have run: :func:`logs.configure`)."""

    def __init__(self, log_format: str, level: str) -> None:
        self.format = log_format
        self.switch = LevelSwitch(level)
        logger = logging.getLogger("mmaas")
        for handler in logger.handlers:
            handler.addFilter(self.switch)
        self._set_level()

    def _set_level(self) -> None:
        """The logger skips debug records (one per request) unless verbose is on."""
        verbose = self.switch.verbose > 0
        logging.getLogger("mmaas").setLevel(logging.DEBUG if verbose else logging.INFO)

    def current(self) -> dict[str, Value]:
        """Every setting, by Triton's names."""
        return {
            "log_file": "",
            **self.switch.enabled,
            "log_verbose_level": self.switch.verbose,
            "log_format": self.format,
        }

    def update(self, changes: Mapping[str, object]) -> dict[str, Value]:
        """Apply ``changes`` (all or none) and return :meth:`current`.

        Raises:
            InvalidArgument: an unknown setting or a value of the wrong type.
            Unsupported: ``log_file`` set to a file, or the ``ISO8601`` format.
        """
        staged = self.current()
        for raw_key, value in changes.items():
            key = ALIASES.get(raw_key, raw_key)
            if key not in staged:
                raise InvalidArgument(
                    f"unknown log setting {raw_key!r}; the settings are {', '.join(staged)}"
                )
            staged[key] = _checked(key, value)
        self.format = str(staged["log_format"])
        for name in LEVELS:
            self.switch.enabled[name] = bool(staged[name])
        self.switch.verbose = int(staged["log_verbose_level"])
        self._set_level()
        formatter = logs.JsonFormatter() if self.format == "json" else logs.TextFormatter()
        for handler in logging.getLogger("mmaas").handlers:
            handler.setFormatter(formatter)
        return self.current()


def _checked(key: str, value: object) -> Value:
    if key in LEVELS:
        if not isinstance(value, bool):
            raise InvalidArgument(f"log setting {key!r} must be a boolean, got {value!r}")
        return value
    if key == "log_verbose_level":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"log setting {key!r} must be an integer >= 0, got {value!r}")
        return value
    if not isinstance(value, str):
        raise InvalidArgument(f"log setting {key!r} must be a string, got {value!r}")
    if key == "log_file":
        if value:
            raise Unsupported(
                f"log setting 'log_file' = {value!r} is not supported: mmaas logs to stderr "
                "(the container's log); leave it empty"
            )
        return value
    if value not in FORMATS:
        raise Unsupported(
            f"log setting 'log_format' = {value!r} is not supported; mmaas writes 'text' "
            "(Triton's 'default') or 'json' (JSON lines)"
        )
    return FORMATS[value]


TRACE = {
    "trace_file": [""],
    "trace_level": ["OFF"],
    "trace_rate": ["1000"],
    "trace_count": ["-1"],
    "log_frequency": ["0"],
}


def trace_settings(changes: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Triton's trace extension (``docs/protocol/extension_trace.md``): mmaas does not
    trace requests, so the settings are Triton's defaults with ``trace_level`` OFF; asking
    for them, or setting a value they already have (or clearing one), answers them.

    Raises:
        InvalidArgument: an unknown setting.
        Unsupported: any other value, by name.
    """
    for key, values in changes.items():
        if key not in TRACE:
            raise InvalidArgument(
                f"unknown trace setting {key!r}; the settings are {', '.join(TRACE)}"
            )
        if list(values) not in ([], TRACE[key]):
            raise Unsupported(
                f"trace setting {key!r} = {list(values)!r} is not supported: mmaas does not "
                "trace requests (trace_level stays OFF); use the Prometheus metrics and "
                "per-request log lines (log_verbose_level 1 or MMAAS_LOG_LEVEL=debug)"
            )
    return {key: list(values) for key, values in TRACE.items()}
