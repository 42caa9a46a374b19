"""Property-based checks of R6 and of random update/refresh sequences on every backend."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_memory.core import MemoryCore
from partner_memory.model import Message
from partner_memory.normalize import RawSlice, normalize_slices
from partner_memory.store import MemoryStore
from tests.conftest import FakeClock
from tests.helpers import assert_unit_consistent

maybe_int = st.none() | st.integers(min_value=-1000, max_value=1000)
raw_slices = st.lists(
    st.none()
    | st.builds(
        RawSlice,
        summary=st.text(max_size=5),
        id=st.none() | st.text(min_size=1, max_size=8),
        start_index=maybe_int,
        end_index=maybe_int,
        timestamp=st.none() | st.integers(min_value=-5, max_value=50),
    ),
    max_size=12,
)


@given(raws=raw_slices, length=st.integers(min_value=0, max_value=40), unit_time=st.integers(1, 99))
def test_r6_normalised_slices_always_index_safely(
    raws: list[RawSlice | None], length: int, unit_time: int
) -> None:
    """R6: whatever comes in, slices come out inside the unit, with ids and positive times."""
    fixed = normalize_slices(raws, length, unit_time)
    assert len(fixed) == sum(r is not None for r in raws)
    for s in fixed:
        assert 0 <= s.start_index <= s.end_index <= length
        assert s.id
        assert s.timestamp > 0
    assert [s.timestamp for s in fixed] == sorted(s.timestamp for s in fixed)
    again = normalize_slices(
        [RawSlice(s.summary, s.id, s.start_index, s.end_index, s.timestamp) for s in fixed],
        length,
        unit_time,
    )
    assert again == fixed  # normalisation is idempotent


text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)
step = st.one_of(
    st.just("refresh"),
    st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), text), max_size=6),
)
_namespaces = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(step, max_size=12))
def test_random_updates_and_refreshes_lose_nothing(store: MemoryStore, steps: list[object]) -> None:
    """R5/R7: slices cover disjoint ordered ranges and every message is stored once, in order."""
    core = MemoryCore(store, f"prop-{next(_namespaces)}", clock=FakeClock())
    expected: dict[str, list[tuple[str, str]]] = {}
    for item in steps:
        if item == "refresh":
            core.refresh_memory_session()
            continue
        assert isinstance(item, list)
        batch = [Message(role=role, content=content) for role, content in item]
        update = core.update_memory_unit(batch, "s")
        expected.setdefault(update.unit.id, []).extend((m.role, m.content) for m in batch)
    assert sorted(core.unit_ids()) == sorted(expected)
    for unit_id, sent in expected.items():
        assert [(m.role, m.content) for m in core.read_messages(unit_id)] == sent
        assert_unit_consistent(core, unit_id)
        slices = core.list_slices(unit_id)
        assert [(s.start_index, s.end_index) for s in slices] == sorted(
            (s.start_index, s.end_index) for s in slices
        )
