"""What a process's log follower keeps between rounds, bounded."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from partner_memory.model import LogEntry
from partner_memory.rolling.follow import LOOKED_AHEAD_KEPT, ReadAhead
from partner_memory.store.contract.base import FollowerPosition


def _entries(*seqs: int) -> list[LogEntry]:
    return [cast(Any, SimpleNamespace(seq=s)) for s in seqs]


def test_rollings_read_ahead_are_kept_for_a_bounded_number_of_namespaces() -> None:
    looked = ReadAhead()
    for n in range(LOOKED_AHEAD_KEPT + 3):
        looked.keep(("recall", f"ns-{n}"), 7, _entries(2, 3))
    at = FollowerPosition(1, 7)
    assert looked.take(("recall", "ns-0"), at) == []  # the oldest went first
    assert looked.take(("recall", "ns-2"), at) == []
    assert [e.seq for e in looked.take(("recall", "ns-3"), at)] == [2, 3]
    assert looked.take(("recall", "ns-3"), at) == []  # taken: the next round reads its own


def test_rollings_read_ahead_are_given_only_past_the_position_in_their_generation() -> None:
    looked = ReadAhead()
    looked.keep(("c", "ns"), 7, _entries(2, 3, 4))
    assert [e.seq for e in looked.take(("c", "ns"), FollowerPosition(3, 7))] == [4]
    looked.keep(("c", "ns"), 7, _entries(2, 3, 4))
    assert looked.take(("c", "ns"), FollowerPosition(1, 8)) == []  # a forget since
