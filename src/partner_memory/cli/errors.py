"""The one place where library errors become exit codes and messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    LLMError,
    NotFoundError,
    PartnerMemoryError,
    StorageUnavailableError,
)

#: Exit codes, documented in the README; 2 is the CLI library's usage error.
EXIT_CODES: dict[type[PartnerMemoryError], int] = {
    NotFoundError: 3,
    InvalidInputError: 4,
    ConflictError: 5,
    ConfigurationError: 6,
    StorageUnavailableError: 7,
    LLMError: 8,
}
EXIT_OTHER = 1

_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def exit_code(error: PartnerMemoryError) -> int:
    for kind, code in EXIT_CODES.items():
        if isinstance(error, kind):
            return code
    return EXIT_OTHER


@contextmanager
def reported() -> Iterator[None]:
    """Print a library error as one line on stderr and exit with its code."""
    try:
        yield
    except PartnerMemoryError as exc:
        # the message is text, never markup: "[postgres]" and "x[/]" print as written
        _stderr.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True)
        raise typer.Exit(exit_code(exc)) from None
