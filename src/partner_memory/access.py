"""Who may do what, whichever interface was asked: a caller's API key, checked
against a namespace and a scope (HTTP's routes, MCP over HTTP and the inspector's
pages all apply this one rule).

Once any live key exists in the store, every request needs a key: refused
(401) without one or with an unknown or revoked key, 403 outside the key's
namespaces or scope. With no key at all the service is open (`serve` allows
that only on loopback or with `--insecure`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from partner_memory.errors import NotFoundError
from partner_memory.keys import ApiKey, KeyRing
from partner_memory.memory import PartnerMemory
from partner_memory.model import check_namespace
from partner_memory.service import MemoryService


class Refused(Exception):
    """A request the key does not allow: 401 or 403."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Access:
    service: MemoryService
    keys: KeyRing

    def caller(self, authorization: str | None) -> ApiKey | None:
        """The request's key; None when the store holds no live key (an open service)."""
        if authorization is None or not authorization.startswith("Bearer "):
            if self.keys.any_live():
                raise Refused(401, "a key is needed: Authorization: Bearer KEY")
            return None
        found = self.keys.authenticate(authorization[len("Bearer ") :])
        if found is None:
            raise Refused(401, "unknown or revoked key")
        return found

    @staticmethod
    def allowed(key: ApiKey | None, namespace: str, scope: str) -> str:
        """The namespace (decoded from its path segment), if the key opens it for `scope`."""
        return Access.permitted(key, unquote(namespace), scope)

    @staticmethod
    def permitted(key: ApiKey | None, name: str, scope: str) -> str:
        """The namespace `name`, if it is valid and the key opens it for `scope`."""
        name = check_namespace(name)
        if key is not None and not key.allows(name, scope):
            raise Refused(403, f"this key may not {scope} namespace {name!r}")
        return name

    def memory(self, namespace: str, *, create: bool = False) -> PartnerMemory:
        """The namespace's handle; 404 if it does not exist and is not to be created -
        naming no other namespace (a key may not know of them)."""
        if not create and self.service.queries.namespace(namespace) is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        return self.service.memory(namespace, create=create)
