"""partner-memory: a lossless, inspectable long-term memory store for AI agents."""

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
from partner_memory.store import Capability, MemoryStore, Record, StoredRecord, Unrecord, open_store
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
