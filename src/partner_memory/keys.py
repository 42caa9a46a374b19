"""API keys of the memory service: made once, stored hashed, checked on every request.

A key reads `pm_<id>_<secret>`: the id finds the stored key (and names it when
listing or revoking), the secret is kept only as its SHA-256 (the secret is
32 random bytes, so a plain hash is as strong as a slow one) and compared
in constant time. A key opens the namespaces its glob matches
(`agent-42/*`, `*`) up to its scope: read < write < admin. Every check reads
the store, so a key revoked by one process is refused by all at once.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from fnmatch import fnmatchcase

from partner_memory.clock import Clock, system_clock
from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.model import Record, check_text
from partner_memory.store.contract.capabilities import KEYS, StoredKey, require

#: What a key may do, each including the ones before it.
SCOPES = ("read", "write", "admin")
#: Longest namespace pattern of a key.
MAX_PATTERN_CHARS = 300
_TOKEN = re.compile(r"pm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_SESSION = re.compile(r"([0-9a-f]{12})\.([0-9]{1,16})\.([0-9a-f]{64})")
#: How long an inspector session lasts (ms): a working day.
SESSION_LIFETIME_MS = 8 * 3_600_000


@dataclass(frozen=True, slots=True)
class ApiKey(Record):
    """A key as it is shown: never its secret."""

    id: str
    namespaces: str
    scope: str
    created_at: int
    revoked_at: int | None = None

    def allows(self, namespace: str, scope: str) -> bool:
        """Whether the key opens `namespace` for `scope`."""
        return (
            self.revoked_at is None
            and fnmatchcase(namespace, self.namespaces)
            and SCOPES.index(self.scope) >= SCOPES.index(scope)
        )

    def reaches(self, scope: str) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(scope)


def _shown(key: StoredKey) -> ApiKey:
    return ApiKey(key.key_id, key.namespaces, key.scope, key.created_at, key.revoked_at)


def _session_mac(secret_hash: str, key_id: str, until: int) -> str:
    message = f"inspector-session:{key_id}:{until}".encode()
    return hmac.new(secret_hash.encode(), message, hashlib.sha256).hexdigest()


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyRing:
    """Creates, lists, revokes and checks the keys kept in one store."""

    def __init__(self, store: object, clock: Clock = system_clock) -> None:
        self.store = require(store, KEYS)
        self.clock = clock

    def create(self, namespaces: str, scope: str) -> tuple[ApiKey, str]:
        """A new key and its token - the only time the token exists outside its holder."""
        check_text(namespaces, "namespaces")
        if not namespaces.strip() or len(namespaces) > MAX_PATTERN_CHARS:
            raise InvalidInputError(
                f"namespaces must be a pattern of 1 to {MAX_PATTERN_CHARS} characters"
                " such as 'agent-42/*' or '*'"
            )
        if scope not in SCOPES:
            raise InvalidInputError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        stored = StoredKey(key_id, _digest(secret), namespaces, scope, self.clock(), None)
        self.store.add_api_key(stored)
        return _shown(stored), f"pm_{key_id}_{secret}"

    def list(self) -> list[ApiKey]:
        return [_shown(k) for k in self.store.api_keys()]

    def revoke(self, key_id: str) -> None:
        check_text(key_id, "key id")
        if not self.store.revoke_api_key(key_id, at=self.clock()):
            raise NotFoundError(f"API key {key_id!r} not found")

    def authenticate(self, token: str) -> ApiKey | None:
        """The live key `token` is, or None (malformed, unknown, wrong secret, revoked)."""
        matched = _TOKEN.fullmatch(token.strip())
        if matched is None:
            return None
        stored = self.store.find_api_key(matched.group(1))
        if stored is None or stored.revoked_at is not None:
            return None
        if not hmac.compare_digest(stored.secret_hash, _digest(matched.group(2))):
            return None
        return _shown(stored)

    def session(self, key: ApiKey, *, lifetime_ms: int = SESSION_LIFETIME_MS) -> str:
        """A browser session for `key`, for the inspector's cookie in place of the key: it
        opens only the inspector's pages, ends after `lifetime_ms` or when the key is
        revoked, and neither reveals the key nor can be stretched (it is an HMAC keyed by
        the stored hash, which only the database holds)."""
        stored = self.store.find_api_key(key.id)
        if stored is None:
            raise NotFoundError(f"key {key.id} not found")
        until = self.clock() + lifetime_ms
        return f"{key.id}.{until}.{_session_mac(stored.secret_hash, key.id, until)}"

    def from_session(self, session: str) -> ApiKey | None:
        """The live key a `session` was made for, or None (malformed, expired, revoked)."""
        matched = _SESSION.fullmatch(session.strip())
        if matched is None:
            return None
        key_id, until = matched.group(1), int(matched.group(2))
        if until < self.clock():
            return None
        stored = self.store.find_api_key(key_id)
        if stored is None or stored.revoked_at is not None:
            return None
        expected = _session_mac(stored.secret_hash, key_id, until)
        if not hmac.compare_digest(expected, matched.group(3)):
            return None
        return _shown(stored)

    def any_live(self) -> bool:
        return any(k.revoked_at is None for k in self.store.api_keys())
