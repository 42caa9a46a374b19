"""The rolling pipeline: from the trajectory to stored slices and context (R13-R20)."""

from partner_memory.rolling.after_rolling import (
    AfterRolling,
    AfterRollingRegistry,
    ConsumerFailure,
    RollingResult,
)
from partner_memory.rolling.compress import LLMCompressor, MessageCompressor, TruncatingCompressor
from partner_memory.rolling.consumers import ConsumerDispatcher, DurableConsumer
from partner_memory.rolling.dialog_rolling import DialogRolling
from partner_memory.rolling.llm import ChatClient, LLMError, LLMSettings, UsageMeter
from partner_memory.rolling.settings import RollingSettings
from partner_memory.rolling.summarize import (
    ExtractiveSummarizer,
    LLMSummarizer,
    MessageSummarizer,
    SummarizerChain,
    Summary,
)

__all__ = [
    "AfterRolling",
    "AfterRollingRegistry",
    "ChatClient",
    "ConsumerDispatcher",
    "ConsumerFailure",
    "DialogRolling",
    "DurableConsumer",
    "ExtractiveSummarizer",
    "LLMCompressor",
    "LLMError",
    "LLMSettings",
    "LLMSummarizer",
    "MessageCompressor",
    "MessageSummarizer",
    "RollingResult",
    "RollingSettings",
    "SummarizerChain",
    "Summary",
    "TruncatingCompressor",
    "UsageMeter",
]
