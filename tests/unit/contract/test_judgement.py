"""A checked stream judged for its tier and for a consumer."""

from support.events import removed, stored

from harness.contract.checker import StreamChecker
from harness.contract.judgement import Judgement, Tier
from harness.contract.reading import Reading

STRICT = Tier("strict", "--tier", frozenset({"K1", "K2", "K3", "K4", "K7"}))
DEFAULT = Tier("default", "--tier", frozenset({"K1"}))


def checked(reading=None) -> StreamChecker:
    """A Mamba group 0 with one store of K6's shape, an attention group 1
    with one C1 and one C2."""
    checker = StreamChecker(witnesses_per_rule=5, reading=reading)
    checker.apply(
        [
            stored([1], None, group=0, kind="mamba"),
            stored([3], 2, group=0, kind="mamba"),
            stored([11], None, group=1, kind="full_attention"),
            stored([13], 12, group=1, kind="full_attention"),
            removed([99], group=1),
        ]
    )
    return checker


def test_the_strict_tier_keeps_k6_as_released_and_says_so():
    judgement = Judgement(checked(), STRICT)
    assert judgement.counts("violation") == {"C1": 1, "C2": 1}
    assert judgement.counts("kept") == {"C1": 1}
    lines = judgement.lines()
    [kept] = [line for line in lines if line.startswith("  kept as released")]
    assert kept.startswith("  kept as released by the strict tier, not violations")
    assert "class K6" in kept
    assert "    GPU group 0 (mamba): none; kept as released (K6): C1 1" in lines


def test_without_a_tier_k6s_shape_is_judged_and_named():
    judgement = Judgement(checked(), Tier(None))
    assert judgement.counts("violation") == {"C1": 2, "C2": 1}
    assert judgement.counts("kept") == {}
    [note] = [line for line in judgement.lines() if "of K6's shape" in line]
    assert note.startswith("  C1 of K6's shape (")
    assert "give --tier strict or --python ENGINE-PYTHON" in note


def test_a_tier_that_does_not_fix_k4_judges_k6s_shape():
    judgement = Judgement(checked(), DEFAULT)
    assert judgement.violation_count == 3
    assert any("does not fix K4" in line for line in judgement.lines())


def test_for_a_consumer_the_tier_keeps_nothing_it_refuses():
    judgement = Judgement(checked(Reading("tree", "", rules=frozenset({"C1"}))), STRICT)
    assert judgement.counts("violation") == {"C1": 2}
    assert judgement.counts("left out") == {"C2": 1}
    assert judgement.counts("kept") == {}
    lines = judgement.lines()
    assert "  C2 removal soundness: 1, not judged: tree does not read it" in lines
    assert any(line.startswith("  C1 of K6's shape") for line in lines)


def test_a_view_a_consumer_drops_is_named_with_its_events():
    reading = Reading("attention", "", kinds=frozenset({"full_attention"}))
    judgement = Judgement(checked(reading), Tier(None))
    assert judgement.counts("violation") == {"C1": 1, "C2": 1}
    lines = judgement.lines()
    assert "    GPU group 0 (mamba): not read by attention (2 events)" in lines
    assert "  left out: 2 event(s): attention drops mamba groups" in lines
