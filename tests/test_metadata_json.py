"""JSON written and read by orjson is what the standard library gives.

`dump_metadata`, `load_metadata` and the transcript readers take orjson's
quick path where it agrees with `json` exactly: the same stored text for the
same metadata (so a database written before holds what one written now
would), the same value for any text read, and the same message ids.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partner_memory import json_text
from partner_memory.errors import InvalidInputError
from partner_memory.ingest import transcripts
from partner_memory.model import Message, dump_metadata, load_metadata

STDLIB = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

#: Any text, lone surrogates and control characters included.
text = st.one_of(
    st.text(st.characters(codec=None, categories=None), max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\x00\x1f\x7f\u2028", "12345678901234567890"]),
)
#: Ints around both 64-bit edges and far beyond them.
edges = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**30)]
integers = st.one_of(st.integers(), st.sampled_from(edges))
flat_values = st.one_of(text, integers, st.booleans(), st.none())
json_values = st.recursive(
    st.one_of(flat_values, st.floats(allow_nan=False, allow_infinity=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)


def _stdlib(metadata: dict[str, Any]) -> str | None:
    """What the standard library writes, None where no backend could store it."""
    written = STDLIB.encode(metadata)
    try:
        written.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return written


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(text, flat_values, max_size=6))
def test_flat_metadata_is_written_as_the_standard_library_writes_it(
    metadata: dict[str, Any],
) -> None:
    expected = _stdlib(metadata)
    if expected is None:
        with pytest.raises(InvalidInputError, match="not valid Unicode text"):
            dump_metadata(metadata)
    else:
        assert dump_metadata(metadata) == expected


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(text, json_values, max_size=6))
def test_what_was_written_reads_back_as_the_standard_library_reads_it(
    metadata: dict[str, Any],
) -> None:
    if _stdlib(metadata) is None:
        return  # refused, as above
    written = dump_metadata(metadata)
    read = load_metadata(written)
    expected = json.loads(written)
    assert read == expected
    # == takes 1 for 1.0 and True for 1: the types must be the same too
    assert json.dumps(read, sort_keys=True) == json.dumps(expected, sort_keys=True)


@pytest.mark.parametrize(
    "stored",
    [
        '{"a":123456789012345678901234567890}',
        '{"a":-9223372036854775809}',
        '{"a":9999999999999999999}',
        '{"a":"\\ud800"}',
        '{"a":1e+16,"b":[1e-07,-0.0]}',
        '{"a":"12345678901234567890"}',
    ],
)
def test_text_orjson_would_read_otherwise_is_read_by_the_standard_library(stored: str) -> None:
    read = load_metadata(stored)
    assert json.dumps(read) == json.dumps(json.loads(stored))


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ({1: "x"}, "keys must be strings, got int 1"),
        ({"f": float("nan")}, "not JSON-serialisable"),
        ({"o": object()}, "not JSON-serialisable"),
        ({"a": "\ud800"}, "not valid Unicode text"),
        ({"\udfff": 1}, "not valid Unicode text"),
        ({"a": [{"b": "x\ud800"}]}, "not valid Unicode text"),
    ],
)
def test_what_json_cannot_hold_is_refused_by_name(metadata: dict[Any, Any], named: str) -> None:
    with pytest.raises(InvalidInputError, match=named):
        Message(role="user", content="x", metadata=metadata)


def test_str_subclasses_and_big_ints_are_written_by_the_standard_library() -> None:
    class Name(str):
        pass

    metadata = {Name("speaker"): Name("Mei"), "id": 2**70}
    assert dump_metadata(metadata) == STDLIB.encode(metadata)


@settings(max_examples=1000, deadline=None)
@given(
    st.one_of(json_values, st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e400])),
    st.sampled_from([None, 2]),
)
def test_any_json_text_reads_as_the_standard_library_reads_it(
    value: Any, indent: int | None
) -> None:
    written = json.dumps(value, indent=indent)
    read, expected = json_text.loads(written), json.loads(written)
    assert repr(read) == repr(expected)  # nan != nan; repr tells int, float and bool apart


@pytest.mark.parametrize("text", ['{"a": 1', "[1,]", "", "nul", '{"a": 1} x', "[" * 2_000])
def test_broken_json_fails_as_the_standard_library_says(text: str) -> None:
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        expected: BaseException = exc
    with pytest.raises(type(expected)) as caught:
        json_text.loads(text)
    assert str(caught.value) == str(expected)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=200))
def test_derived_ids_are_uuid5(name: str) -> None:
    expected = str(uuid.uuid5(transcripts._ID_NAMESPACE, name))
    assert transcripts.stable_id(name, "x") == expected
