"""The `partner-memory` command line: thin commands over the library."""

from partner_memory.cli import (
    bench_commands,
    forget_commands,
    memory_commands,
    recall_commands,
    serve_commands,
)
from partner_memory.cli.app import app, main

# they register their commands
del bench_commands, forget_commands, memory_commands, recall_commands, serve_commands

__all__ = ["app", "main"]
