"""Which `Host` a request may name: the defence against DNS rebinding.

A web page whose name is made to resolve to 127.0.0.1 can send requests to
a loopback service, and the browser then treats the answers as that page's
own: with no key (the default of a loopback `serve`), it could read and
forget memory. Such a request names the page's host in `Host`, so every
route refuses (421) a `Host` that is not on the list: the loopback names at
the served port, the bound address, and what `--allowed-host` adds (a
reverse proxy's name; `NAME` for any port, `NAME:PORT` for one, `*` for
any host). The MCP SDK's own rebinding check gets the same list.

A wildcard bind (`0.0.0.0`, `::`) with no `--allowed-host` checks no `Host`:
such a service is reachable from the network, which needs keys (or
`--insecure`), and a key is what a rebinding page does not have.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecuritySettings

from partner_memory.errors import ConfigurationError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})
#: How `serve` hands the list to its worker processes.
ENVIRONMENT_VARIABLE = "PARTNER_MEMORY_ALLOWED_HOSTS"


def _split(host: str) -> tuple[str, int | None]:
    """`name[:port]` as (lower-case name, port or None); IPv6 keeps its brackets."""
    host = host.strip().lower()
    name, colon, port = host.rpartition(":")
    if not colon or (name.count(":") and not name.endswith("]")):
        return host, None  # no port, or a bare IPv6 address
    if not port.isdigit():
        raise ValueError(f"port {port!r} is not a number")
    return name, int(port)


def _bracketed(address: str) -> str:
    try:
        is_v6 = ipaddress.ip_address(address.strip("[]")).version == 6
    except ValueError:
        return address.lower()
    return f"[{address.strip('[]')}]" if is_v6 else address


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The `Host` values served: (name, port) pairs, a port of None meaning any;
    `allowed=None` serves every host."""

    allowed: tuple[tuple[str, int | None], ...] | None = tuple((n, None) for n in LOOPBACK_NAMES)

    @classmethod
    def for_serving(cls, bind: str, port: int, extra: Iterable[str] = ()) -> HostPolicy:
        """The list for a server bound to `bind`:`port`, plus `--allowed-host` entries."""
        entries = [e.strip() for e in extra if e.strip()]
        if "*" in entries:
            return cls(None)
        pairs: list[tuple[str, int | None]] = [(name, None) for name in LOOPBACK_NAMES]
        if bind.strip() in _WILDCARDS:
            if not entries:
                return cls(None)
        else:
            pairs.append((_bracketed(bind.strip()), port))
        for entry in entries:
            try:
                pairs.append(_split(entry))
            except ValueError as exc:
                raise ConfigurationError(f"--allowed-host {entry!r}: {exc}") from exc
        return cls(tuple(dict.fromkeys(pairs)))

    @classmethod
    def from_env_value(cls, value: str) -> HostPolicy:
        if value == "*":
            return cls(None)
        return cls(tuple(_split(entry) for entry in value.split(",") if entry))

    def env_value(self) -> str:
        if self.allowed is None:
            return "*"
        return ",".join(name if port is None else f"{name}:{port}" for name, port in self.allowed)

    def permits(self, host: str | None) -> bool:
        """Whether a request naming `host` is served (one naming none is not from a browser)."""
        if self.allowed is None or host is None:
            return True
        try:
            name, port = _split(host)
        except ValueError:
            return False
        return any(name == n and p in (None, port) for n, p in self.allowed)

    def mcp_settings(self) -> TransportSecuritySettings:
        """The MCP SDK's rebinding check, with this list (Origins of the same hosts)."""
        if self.allowed is None:
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        hosts: list[str] = []
        for name, port in self.allowed:
            hosts += [name, f"{name}:*"] if port is None else [f"{name}:{port}"]
        origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins)

    def describe(self) -> Sequence[str]:
        """The served hosts as an operator writes them (for errors and logs)."""
        return self.env_value().split(",")
