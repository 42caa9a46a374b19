"""The memory inspector: pages to see, search and correct what an agent remembers.

Served by `partner-memory serve` at `/` (and `partner-memory inspect`, read-only
on loopback). Pages are rendered on the server (Jinja2), so reading works
without JavaScript; a small script shows times in the browser's time zone.
The same API keys apply: a read key shows, an admin key may forget.
"""

from partner_memory.inspector.pages import router

__all__ = ["router"]
