"""Time listing: what a date (or a topic) alone finds, in time order, scored 0."""

from __future__ import annotations

import tantivy

from partner_memory.recall.index_layout import MESSAGE_KIND, SCHEMA, place_of
from partner_memory.recall.searcher import Hit, Place, Search


def by_time(
    searcher: tantivy.Searcher,
    search: Search,
    have: set[Place],
    filters: list[tuple[tantivy.Occur, tantivy.Query]],
) -> list[Hit]:
    """The first messages of [since, until) (or of a topic's ranges) in time order,
    newest first if `search.newest_first`, scored 0: what the date alone finds (stored
    and window messages alike)."""
    want = search.k - len(have)
    messages = tantivy.Query.term_query(SCHEMA, "kind", MESSAGE_KIND)
    query = tantivy.Query.boolean_query([(tantivy.Occur.Must, messages), *filters])
    order = tantivy.Order.Desc if search.newest_first else tantivy.Order.Asc
    found = searcher.search(
        query, want + len(have), count=False, order_by_field="time", order=order
    ).hits
    timed: list[tuple[int, tuple[str, int], Place]] = []
    for time, address in found:
        place = place_of(searcher.doc(address))
        timed.append((int(time), (place[0] or "", place[1]), place))
    if search.within is None:
        timed += [
            (d.timestamp, ("\uffff", d.position), (None, d.position))  # after the stored
            for d in search.window
            if d.timestamp is not None and search.admits(d)
        ]
    # newest first: the later time, and of one time the later place
    timed.sort(reverse=search.newest_first)
    return [Hit(place, 0.0) for _, _, place in timed if place not in have][:want]
