"""partner-memory: a lossless, inspectable long-term memory store for AI agents.

The names below are imported on first use (PEP 562): a process that needs one
part, such as the analysis worker an ingest starts, does not load the LLM
client, the search engine and the rest to get it.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
    from partner_memory.clock import Clock, system_clock
    from partner_memory.config import Settings
    from partner_memory.context import ContextBlock, ContextWorkspace, Domain
    from partner_memory.core import MemoryCore, UnitPage
    from partner_memory.errors import (
        AccessDeniedError,
        ConfigurationError,
        ConflictError,
        EmbeddingRejected,
        InvalidInputError,
        LLMError,
        NotFoundError,
        PartnerMemoryError,
        StorageUnavailableError,
    )
    from partner_memory.memory import PartnerMemory
    from partner_memory.model import (
        ConsumerStatus,
        LogEntry,
        MemorySlice,
        MemoryUnit,
        Message,
        NamespaceInfo,
        UnitInfo,
        UnitUpdate,
    )
    from partner_memory.rolling import (
        AfterRolling,
        DurableConsumer,
        LLMSettings,
        MessageCompressor,
        MessageSummarizer,
        RollingResult,
        RollingSettings,
    )
    from partner_memory.service import MemoryService
    from partner_memory.settings import StoreSettings
    from partner_memory.store import (
        Capability,
        MemoryStore,
        Record,
        StoredRecord,
        Unrecord,
        open_store,
    )
    from partner_memory.trajectory import Turn

__all__ = [
    "AccessDeniedError",
    "AfterRolling",
    "Capability",
    "Clock",
    "ConfigurationError",
    "ConflictError",
    "ConsumerStatus",
    "ContextBlock",
    "ContextWorkspace",
    "Domain",
    "DurableConsumer",
    "EmbeddingRejected",
    "InvalidInputError",
    "LLMError",
    "LLMSettings",
    "LogEntry",
    "MemoryCore",
    "MemoryService",
    "MemorySlice",
    "MemoryStore",
    "MemoryUnit",
    "Message",
    "MessageCompressor",
    "MessageSummarizer",
    "NamespaceInfo",
    "NotFoundError",
    "PartnerMemory",
    "PartnerMemoryError",
    "Record",
    "RollingResult",
    "RollingSettings",
    "Settings",
    "StorageUnavailableError",
    "StoreSettings",
    "StoredRecord",
    "Turn",
    "UnitInfo",
    "UnitPage",
    "UnitUpdate",
    "Unrecord",
    "open_store",
    "system_clock",
]

#: Where each public name is defined.
_HOMES = {
    "AccessDeniedError": "partner_memory.errors",
    "AfterRolling": "partner_memory.rolling",
    "Capability": "partner_memory.store",
    "Clock": "partner_memory.clock",
    "ConfigurationError": "partner_memory.errors",
    "ConflictError": "partner_memory.errors",
    "ConsumerStatus": "partner_memory.model",
    "ContextBlock": "partner_memory.context",
    "ContextWorkspace": "partner_memory.context",
    "Domain": "partner_memory.context",
    "DurableConsumer": "partner_memory.rolling",
    "EmbeddingRejected": "partner_memory.errors",
    "InvalidInputError": "partner_memory.errors",
    "LLMError": "partner_memory.errors",
    "LLMSettings": "partner_memory.rolling",
    "LogEntry": "partner_memory.model",
    "MemoryCore": "partner_memory.core",
    "MemoryService": "partner_memory.service",
    "MemorySlice": "partner_memory.model",
    "MemoryStore": "partner_memory.store",
    "MemoryUnit": "partner_memory.model",
    "Message": "partner_memory.model",
    "MessageCompressor": "partner_memory.rolling",
    "MessageSummarizer": "partner_memory.rolling",
    "NamespaceInfo": "partner_memory.model",
    "NotFoundError": "partner_memory.errors",
    "PartnerMemory": "partner_memory.memory",
    "PartnerMemoryError": "partner_memory.errors",
    "Record": "partner_memory.store",
    "RollingResult": "partner_memory.rolling",
    "RollingSettings": "partner_memory.rolling",
    "Settings": "partner_memory.config",
    "StorageUnavailableError": "partner_memory.errors",
    "StoreSettings": "partner_memory.settings",
    "StoredRecord": "partner_memory.store",
    "Turn": "partner_memory.trajectory",
    "UnitInfo": "partner_memory.model",
    "UnitPage": "partner_memory.core",
    "UnitUpdate": "partner_memory.model",
    "Unrecord": "partner_memory.store",
    "open_store": "partner_memory.store",
    "system_clock": "partner_memory.clock",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found here from now on, without this call
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
