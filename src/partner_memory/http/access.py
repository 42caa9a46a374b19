"""Who may do what: the request's API key, checked against a namespace and a scope.

Once any live key exists in the store, every /v1 request needs
`Authorization: Bearer KEY`: 401 without one or with an unknown or revoked
key, 403 outside the key's namespaces or scope. With no key at all the
service is open (`serve` allows that only on loopback or with `--insecure`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Request

from partner_memory.access import Access
from partner_memory.keys import ApiKey

#: A namespace in a path; one holding "/" is sent with it escaped (%2F).
Ns = Annotated[str, Path(description="The namespace; a '/' in it is sent as %2F.")]


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
