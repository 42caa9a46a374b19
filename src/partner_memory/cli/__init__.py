"""The `partner-memory` command line: thin commands over the library."""

from partner_memory.cli.app import app, main

__all__ = ["app", "main"]
