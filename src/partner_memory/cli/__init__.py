"""The `partner-memory` command line: thin commands over the library."""

from partner_memory.cli import memory_commands, recall_commands
from partner_memory.cli.app import app, main

del memory_commands, recall_commands  # imported for the commands they register on `app`

__all__ = ["app", "main"]
