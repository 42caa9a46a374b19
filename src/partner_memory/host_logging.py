"""The host application's logging is its own: libraries we use that configure the
root logger when imported or built (wordllama's import, the MCP SDK's server) run
inside `root_logging_kept`, which puts the root logger's handlers and level back."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def root_logging_kept() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
