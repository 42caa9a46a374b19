"""Who is looking: the API key from the inspector's cookie (or a Bearer header).

A browser cannot send a Bearer header by itself, so the login page takes a key
and keeps it in an HttpOnly, SameSite=Strict cookie. Pages that change memory
are POSTs whose Origin (or Referer) must be this site, so another site cannot
make a visitor's browser forget anything - even on an open loopback service
where no key is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request

from partner_memory.http.access import Access
from partner_memory.keys import ApiKey

COOKIE = "pm_inspector_key"


class PageError(Exception):
    """A page that cannot be shown: rendered as an error page with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoginNeeded(Exception):
    """No valid key where one is needed: the login page."""


@dataclass(frozen=True, slots=True)
class Viewer:
    access: Access
    key: ApiKey | None
    #: Whether this visitor came with a key at all (shows "log out").
    logged_in: bool

    def may_read(self, namespace: str) -> bool:
        return self.key is None or self.key.allows(namespace, "read")

    def may_forget(self, namespace: str) -> bool:
        if self.access.service.store.read_only:
            return False
        return self.key is None or self.key.allows(namespace, "admin")

    def require(self, namespace: str, scope: str) -> None:
        allowed = self.may_forget(namespace) if scope == "admin" else self.may_read(namespace)
        if not allowed:
            if self.access.service.store.read_only and scope == "admin":
                raise PageError(403, "this inspector is read-only: nothing can be forgotten here")
            raise PageError(403, f"this key may not {scope} namespace {namespace!r}")


def _viewer(request: Request) -> Viewer:
    access: Access = request.app.state.access
    header = request.headers.get("authorization", "")
    token = request.cookies.get(COOKIE) or (header[7:] if header.startswith("Bearer ") else None)
    if token:
        key = access.keys.authenticate(token)
        if key is None:
            raise LoginNeeded
        return Viewer(access, key, logged_in=True)
    if access.keys.any_live():
        raise LoginNeeded
    return Viewer(access, None, logged_in=False)


def same_site(request: Request) -> None:
    """Refuse a form sent from another site (the browser says where it came from)."""
    told = request.headers.get("origin") or request.headers.get("referer")
    if told is None:
        raise PageError(403, "a form must come from this site (no Origin or Referer was sent)")
    origin = urlsplit(told)
    if origin.netloc != request.headers.get("host") or origin.scheme not in ("http", "https"):
        raise PageError(403, "a form must come from this site")


#: The visitor, for a page.
Looking = Annotated[Viewer, Depends(_viewer)]
