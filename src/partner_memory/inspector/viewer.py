"""Who is looking: the key of the inspector's session cookie (or of a Bearer header).

A browser cannot send a Bearer header by itself, so the login page takes a key
and keeps a session made from it (`KeyRing.session`, never the key itself) in
an HttpOnly, SameSite=Strict cookie. Cookies do not keep to a port, so another
service on 127.0.0.1 may be sent it: there it is worth only a few hours of
this inspector, not the key; its name carries the port, so two inspectors on
one machine keep their own. Pages that change memory
are POSTs whose Origin (or Referer) must be this site, so another site cannot
make a visitor's browser forget anything - even on an open loopback service
where no key is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request

from partner_memory.access import Access, Refused
from partner_memory.keys import ApiKey

COOKIE_PREFIX = "pm_inspector_"


def cookie_name(request: Request) -> str:
    """The session cookie of the inspector at this request's port."""
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return f"{COOKIE_PREFIX}{port}"


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
        if self.access.service.read_only:
            return False
        return self.key is None or self.key.allows(namespace, "admin")

    def require(self, namespace: str, scope: str) -> None:
        allowed = self.may_forget(namespace) if scope == "admin" else self.may_read(namespace)
        if not allowed:
            if self.access.service.read_only and scope == "admin":
                raise PageError(403, "this inspector is read-only: nothing can be forgotten here")
            raise PageError(403, f"this key may not {scope} namespace {namespace!r}")


def _viewer(request: Request) -> Viewer:
    """The API's own key rule (`Access.caller`), with the cookie standing in for the header;
    a refusal sends a browser to log in instead of answering 401."""
    access: Access = request.app.state.access
    session = request.cookies.get(cookie_name(request))
    if session:
        key = access.keys.from_session(session)
        if key is None:  # expired, revoked, or not ours: log in again
            raise LoginNeeded
        return Viewer(access, key, logged_in=True)
    try:
        key = access.caller(request.headers.get("authorization"))
    except Refused as exc:
        raise LoginNeeded from exc
    return Viewer(access, key, logged_in=key is not None)


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
