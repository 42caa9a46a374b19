"""Who may do what: the request's API key, checked against a namespace and a scope.

Once any live key exists in the store, every /v1 request needs
`Authorization: Bearer KEY`: 401 without one or with an unknown or revoked
key, 403 outside the key's namespaces or scope. With no key at all the
service is open (`serve` allows that only on loopback or with `--insecure`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import unquote

from fastapi import Depends, Header, Path, Request

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


#: A namespace in a path; one holding "/" is sent with it escaped (%2F).
Ns = Annotated[str, Path(description="The namespace; a '/' in it is sent as %2F.")]


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


async def _access(request: Request) -> Access:
    """Async: a plain `def` dependency would cost each request a hop to a thread."""
    found: Access = request.app.state.access
    return found


def _caller(
    request: Request,
    access: Annotated[Access, Depends(_access)],
    authorization: Annotated[str | None, Header()] = None,
) -> ApiKey | None:
    key = access.caller(authorization)
    if key is not None:  # for the request's log line
        request.state.key_id = key.id
    return key


#: The service's access rules, for a route.
Served = Annotated[Access, Depends(_access)]
#: The request's key (None: an open service), for a route.
Caller = Annotated[ApiKey | None, Depends(_caller)]
