"""Rules R21-R24: context blocks, the workspace and XML rendering."""

from __future__ import annotations

import pytest

from partner_memory.context import (
    ContextBlock,
    ContextWorkspace,
    Domain,
    Exposure,
    Level,
    ResolvedBlock,
    Urgency,
    render_xml,
)
from partner_memory.context.block import level_of
from partner_memory.errors import InvalidInputError
from tests.conftest import ManualClock

M, C, A = Domain.MEMORY, Domain.COMMUNICATION, Domain.ACTION


def block(
    name: str = "b",
    source: str = "s",
    *,
    domains: frozenset[Domain] = frozenset({M}),
    score: float = 100.0,
    activate: float = 0.0,
    replace_fade: float = 0.0,
    time_fade: float = 0.0,
) -> ContextBlock:
    return ContextBlock(
        name=name,
        source=source,
        full=f"{name} full",
        compact=f"{name} compact",
        abstract=f"{name} abstract",
        domains=domains,
        score=score,
        activate=activate,
        replace_fade=replace_fade,
        time_fade_per_minute=time_fade,
    )


@pytest.fixture
def workspace(manual_clock: ManualClock) -> ContextWorkspace:
    return ContextWorkspace(manual_clock)


def test_r21_levels_and_default_renderings() -> None:
    """R21: full from 70, compact from 30, abstract below; compact/abstract default down."""
    assert [level_of(s) for s in (100, 70, 69.9, 30, 29.9, 1)] == [
        Level.FULL,
        Level.FULL,
        Level.COMPACT,
        Level.COMPACT,
        Level.ABSTRACT,
        Level.ABSTRACT,
    ]
    plain = ContextBlock(name="n", source="s", full="everything", domains=frozenset({M}))
    assert plain.score == 100
    assert plain.rendering(Level.COMPACT) == "everything"
    assert plain.rendering(Level.ABSTRACT) == "everything"
    two = ContextBlock(name="n", source="s", full="f", compact="c", domains=frozenset({M}))
    assert two.rendering(Level.ABSTRACT) == "c"


def test_r21_blocks_are_validated() -> None:
    """R21: a block needs a name, a source and at least one domain."""
    with pytest.raises(InvalidInputError, match="domain"):
        ContextBlock(name="n", source="s", full="f", domains=frozenset())
    with pytest.raises(InvalidInputError, match="name"):
        ContextBlock(name="", source="s", full="f", domains=frozenset({M}))
    with pytest.raises(ValueError, match="SMELL"):
        ContextBlock(name="n", source="s", full="f", domains=frozenset({"SMELL"}))  # type: ignore[arg-type]


def test_r22_register_fades_same_source_key(workspace: ContextWorkspace) -> None:
    """R22: older blocks of the same (name, source) lose their replace-fade; the new one is added."""
    first = block(replace_fade=20)
    other = block(source="elsewhere", replace_fade=20)
    workspace.register(first)
    workspace.register(other)
    workspace.register(block(replace_fade=20))
    assert first.score == 80
    assert other.score == 100
    assert len(workspace.blocks) == 3


def test_r22_faded_out_blocks_are_removed(workspace: ContextWorkspace) -> None:
    """R22: a block whose score reaches 0 on replacement is removed."""
    old = block(replace_fade=60)
    workspace.register(old)
    workspace.register(block(replace_fade=60))
    workspace.register(block(replace_fade=60))
    assert old not in workspace.blocks
    assert len(workspace.blocks) == 2
    assert any(e.action == "removed" for e in workspace.trace)


def test_r23_time_fade_per_elapsed_second(
    workspace: ContextWorkspace, manual_clock: ManualClock
) -> None:
    """R23: blocks first decay by time (per minute, applied per elapsed second)."""
    fading = block(time_fade=6)
    workspace.register(fading)
    manual_clock.advance(30_000)
    workspace.resolve([M])
    assert fading.score == pytest.approx(97)
    manual_clock.advance(3_600_000)
    assert workspace.resolve([M]) == []
    assert fading not in workspace.blocks


@pytest.mark.parametrize(
    ("score", "domains", "activate", "expected_score", "exposure", "text"),
    [
        (100, frozenset({M}), 10, 100, Exposure.PRIMARY, "b full"),  # capped at 100
        (75, frozenset({M}), 10, 85, Exposure.PRIMARY, "b full"),  # +activate x 1.0
        (50, frozenset({M}), 100, 100, Exposure.PRIMARY, "b full"),  # +60, compact caps at 100
        (20, frozenset({M}), 100, 70 - 1e-6, Exposure.PRIMARY, "b compact"),  # abstract: < 70
        (20, frozenset({M}), 10, 26, Exposure.PRIMARY, "b compact"),  # +activate x 0.6
        (90, frozenset({C}), 100, 90, Exposure.SECONDARY, "b compact"),  # full: +0
        (50, frozenset({C}), 10, 52, Exposure.SECONDARY, "b compact"),  # +activate x 0.2
        (50, frozenset({C}), 100, 70 - 1e-6, Exposure.SECONDARY, "b compact"),  # < 70
        (25, frozenset({C}), 10, 26, Exposure.SECONDARY, "b abstract"),  # +activate x 0.1
        (25, frozenset({C}), 100, 30 - 1e-6, Exposure.SECONDARY, "b abstract"),  # < 30
    ],
)
def test_r23_activation_ceilings_and_rendering(
    workspace: ContextWorkspace,
    score: float,
    domains: frozenset[Domain],
    activate: float,
    expected_score: float,
    exposure: Exposure,
    text: str,
) -> None:
    """R23: exposure, activation by level, ceilings, and the rendering each exposure gets."""
    target = block(domains=domains, score=score, activate=activate)
    workspace.register(target)
    (resolved,) = workspace.resolve([M, C])
    assert resolved.exposure is exposure
    assert target.score == pytest.approx(expected_score)
    assert resolved.snapshot == text


def test_r23_order_skip_and_merge(workspace: ContextWorkspace) -> None:
    """R23: order by summed domain weight, then score, name, source; merge same source key."""
    workspace.register(block("x", domains=frozenset({M}), score=50))
    workspace.register(block("y", domains=frozenset({C, A}), score=90))
    workspace.register(block("z", domains=frozenset({A})))
    workspace.register(block("unrelated", domains=frozenset({Domain.PERCEIVE})))
    workspace.register(block("a", domains=frozenset({M}), score=50))
    resolved = workspace.resolve([M, C, A])  # weights 3, 2, 1
    assert [(r.name, r.exposure) for r in resolved] == [
        ("y", Exposure.SECONDARY),  # 2 + 1 = 3, score 90
        ("a", Exposure.PRIMARY),  # 3, score 50, name a < x
        ("x", Exposure.PRIMARY),
        ("z", Exposure.SECONDARY),  # 1
    ]
    workspace.register(block("x", domains=frozenset({M}), score=95))
    merged = next(r for r in workspace.resolve([M]) if r.name == "x")
    assert merged.snapshot == "x full"
    assert merged.history == ("x compact",)


def test_r23_expire_and_trace(workspace: ContextWorkspace) -> None:
    """R23: expire removes a source key; every change is traced."""
    workspace.register(block("x"))
    workspace.register(block("x"))
    workspace.register(block("y"))
    assert workspace.expire("x", "s") == 2
    assert [b.name for b in workspace.blocks] == ["y"]
    actions = [e.action for e in workspace.trace]
    assert actions.count("registered") == 3
    assert actions.count("expired") == 2
    with pytest.raises(InvalidInputError):
        workspace.resolve([])


def test_r24_xml_rendering() -> None:
    """R24: elements named after the block with source and urgency; merged blocks nest."""
    single = ResolvedBlock(
        "dialog_history", "dialog_rolling", Urgency.NORMAL, Exposure.PRIMARY, 100, "a < b & c"
    )
    assert render_xml([single]) == (
        '<dialog_history source="dialog_rolling" urgency="NORMAL">a &lt; b &amp; c</dialog_history>'
    )
    merged = ResolvedBlock(
        "note", 'x"y', Urgency.HIGH, Exposure.SECONDARY, 80, "new", history=("old",)
    )
    assert render_xml([merged]) == (
        '<note source=\'x"y\' urgency="HIGH">\n'
        "  <snapshot>new</snapshot>\n"
        "  <history_snapshot>old</history_snapshot>\n"
        "</note>"
    )
