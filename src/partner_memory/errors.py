"""The error tree every layer raises, so callers catch one family.

    PartnerMemoryError
    ├── NotFoundError            an id (namespace, unit, slice) that does not exist
    ├── InvalidInputError        a value, file or field that breaks the data model
    ├── ConflictError            stored state disagrees with what the caller asked for
    ├── ConfigurationError       a setting (database URL, path) that cannot be used
    ├── StorageUnavailableError  the database cannot be opened, read or written now
    ├── LLMError                 a chat completion failed or returned nothing usable
    └── AccessDeniedError        the service refused the client's key (401, 403)

Backends translate driver errors into this tree at their transaction
boundary; the CLI and HTTP layers map it to exit and status codes in one place.
"""

from __future__ import annotations


class PartnerMemoryError(Exception):
    """Base class of every error partner-memory raises on purpose."""


class NotFoundError(PartnerMemoryError, LookupError):
    """A namespace, unit or slice that does not exist; lookups never create one."""


class InvalidInputError(PartnerMemoryError, ValueError):
    """Input that breaks the data model; the message names the offending field or file."""


class ConflictError(PartnerMemoryError):
    """Stored memory disagrees with the requested change, so nothing was written."""


class ConfigurationError(PartnerMemoryError):
    """A setting that cannot be used as given (unknown URL scheme, bad path)."""


class StorageUnavailableError(PartnerMemoryError):
    """The database cannot be reached, opened or written (locked, corrupt, refused)."""


class LLMError(PartnerMemoryError):
    """A chat completion that failed or returned nothing usable; rolling falls back."""


class EmbeddingRejected(LLMError):
    """The embeddings endpoint refused these texts (a 4xx): asking again will not help,
    so they are indexed by words only instead of being retried."""


class AccessDeniedError(PartnerMemoryError, PermissionError):
    """The memory service refused the client's key: none, unknown, revoked (401), or
    outside its namespaces or scope (403)."""
