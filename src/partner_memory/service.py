"""MemoryService: one per process, serving any number of namespaces through handles.

The runtime (`MemoryRuntime`) owns the store, the LLM client, the executor
and the scheduler; the service adds `memory(namespace)`, which hands out one
cheap `PartnerMemory` handle per namespace while it is open.
"""

from __future__ import annotations

from partner_memory.memory import PartnerMemory
from partner_memory.runtime import MemoryRuntime
from partner_memory.settings import DEFAULT_NAMESPACE


class MemoryService(MemoryRuntime):
    """The process-wide owner of store, LLM client, executor and scheduler; hands out handles."""

    def memory(
        self,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        create: bool = True,
        watch_idle: bool = True,
    ) -> PartnerMemory:
        """The handle of one namespace (the same one while it is open); cheap, owns no thread.

        `watch_idle` lets this service's scheduler run the namespace's idle check.
        """
        found = self.served(namespace)
        if isinstance(found, PartnerMemory):
            return found
        handle = PartnerMemory.attach(self, namespace, create=create)
        served = self.adopt(handle, watch_idle=watch_idle)
        return served if isinstance(served, PartnerMemory) else handle
