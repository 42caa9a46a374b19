"""One settings object for the whole library, read from PARTNER_MEMORY_* when asked.

`Settings.from_env()` gathers where memory lives (`StoreSettings`), which LLM
summarises (`LLMSettings`, None offline), every number of rolling
(`RollingSettings`, PARTNER_MEMORY_ROLLING_*) and which embedder recall
uses (`EmbeddingSettings`) and where this host keeps its recall indexes
(`RecallIndexSettings`), each validated with an error
naming the variable. Every entry point - `PartnerMemory.open`,
`MemoryService.open`, their asyncio twins, each CLI command, `serve` and
`inspect` - builds its service from `runtime_options()`, so one environment
means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.replicas import RecallIndexSettings
from partner_memory.rolling.llm import LLMSettings
from partner_memory.rolling.settings import RollingSettings
from partner_memory.settings import StoreSettings


@dataclass(frozen=True, slots=True)
class Settings:
    store: StoreSettings
    llm: LLMSettings | None
    rolling: RollingSettings
    embeddings: EmbeddingSettings
    recall_index: RecallIndexSettings = field(default_factory=RecallIndexSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        return cls(
            store=StoreSettings.from_env(environ),
            llm=LLMSettings.from_env(environ),
            rolling=RollingSettings.from_env(environ),
            embeddings=EmbeddingSettings.from_env(environ),
            recall_index=RecallIndexSettings.from_env(environ),
        )

    def runtime_options(self) -> dict[str, Any]:
        """The keyword options of a service (`MemoryRuntime`, `PartnerMemory`) these
        settings describe: the LLM, rolling's numbers, the embedder, the index's home."""
        return {
            "llm": self.llm,
            "settings": self.rolling,
            "embeddings": self.embeddings,
            "recall_index": self.recall_index,
        }
