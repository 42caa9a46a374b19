"""What a backend offers, in one look: `report(store)`.

For a backend's author (and its README): the core verbs it implements or
still lacks, the optional capabilities it offers, and how it may be deployed.
The conformance suite then says whether what it offers behaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from partner_memory.store.contract.base import LogStore, UnitStore, WindowStore
from partner_memory.store.contract.capabilities import CAPABILITIES, Capability, supports

#: The core layers, by name.
LAYERS: dict[str, type] = {"units": UnitStore, "window": WindowStore, "log": LogStore}


def verbs(protocol: type) -> list[str]:
    """The public verbs and properties a protocol declares, in order."""
    return [
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    ]


@dataclass(frozen=True, slots=True)
class BackendReport:
    backend: str
    #: Core verbs the backend lacks, by layer (empty: it meets the core contract).
    missing: dict[str, list[str]]
    #: Optional capabilities, offered or not.
    capabilities: dict[str, bool]
    #: How it may be deployed (`Capability`), as it declares.
    deployment: list[str]

    @property
    def core(self) -> bool:
        return not any(self.missing.values())

    def __str__(self) -> str:
        lines = [f"{self.backend}: core contract {'met' if self.core else 'NOT met'}"]
        for layer, names in self.missing.items():
            if names:
                lines.append(f"  {layer}: missing {', '.join(names)}")
        for name, offered in self.capabilities.items():
            lines.append(f"  {'+' if offered else '-'} {name}")
        lines.append(f"  deployment: {', '.join(self.deployment) or 'one machine'}")
        return "\n".join(lines)


def report(store: object) -> BackendReport:
    """What `store` offers: its core verbs, optional capabilities and deployment."""
    missing = {
        layer: [v for v in verbs(protocol) if not hasattr(store, v)]
        for layer, protocol in LAYERS.items()
    }
    declared: frozenset[Capability] = getattr(store, "capabilities", frozenset())
    return BackendReport(
        type(store).__name__,
        missing,
        {name: supports(store, c) for name, c in CAPABILITIES.items()},
        sorted(str(c) for c in Capability if c in declared),
    )
