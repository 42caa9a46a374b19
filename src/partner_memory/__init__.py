"""partner-memory: a lossless, inspectable long-term memory store for AI agents."""

from partner_memory.clock import Clock, system_clock
from partner_memory.core import MemoryCore, UnitPage
from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PartnerMemoryError,
    StorageUnavailableError,
)
from partner_memory.model import (
    MemorySlice,
    MemoryUnit,
    Message,
    NamespaceInfo,
    UnitInfo,
    UnitUpdate,
)
from partner_memory.settings import StoreSettings
from partner_memory.store import MemoryStore, open_store

__all__ = [
    "Clock",
    "ConfigurationError",
    "ConflictError",
    "InvalidInputError",
    "MemoryCore",
    "MemorySlice",
    "MemoryStore",
    "MemoryUnit",
    "Message",
    "NamespaceInfo",
    "NotFoundError",
    "PartnerMemoryError",
    "StorageUnavailableError",
    "StoreSettings",
    "UnitInfo",
    "UnitPage",
    "UnitUpdate",
    "open_store",
    "system_clock",
]
