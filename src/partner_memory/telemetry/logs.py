"""`serve --log-format json`: one JSON object per log record, on stderr.

Each request's line (`partner_memory.access`) and each notable event -
a summariser's fallback, a lease taken over, a consumer's failure - carry
their fields as keys (`event`, `namespace`, `status`, `duration_ms`, ...),
so a log pipeline filters on them without parsing text. What the service
logs never holds a body, a message's text, a query or a key; uvicorn's own
lines are kept to warnings, as in the text format.
"""

from __future__ import annotations

from typing import Any

FORMATS = ("text", "json")


def log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's `log_config` for the format (each worker applies it): None keeps
    uvicorn's own text format."""
    if log_format not in FORMATS:
        from partner_memory.errors import ConfigurationError

        raise ConfigurationError(f"--log-format must be text or json, got {log_format!r}")
    if log_format == "text":
        return None
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "json"}
    quiet = {"handlers": ["stderr"], "level": "WARNING", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            }
        },
        "handlers": {"stderr": handler},
        "loggers": {
            "partner_memory": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn": quiet,
            "uvicorn.error": quiet,
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
    }
