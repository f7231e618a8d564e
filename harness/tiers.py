"""The tiers a target's series table names, and what each tier claims:
the classes of docs/contract.md its series fixes, and what its stream is.
Read from harness/targets.toml by harness.targets."""

from harness.contract import CLASSES
from harness.errors import TargetError
from harness.pins import known

# The tiers a series table may name; `default` is required.
TIERS = ("default", "strict")
# What a tier's stream is (docs/contract.md, C7): the pristine stream plus
# ancestry events, or exactly the hashes the pool holds.
STREAMS = ("ancestry", "holdings")


def parse_fixes(name: str, fixes: dict, series: dict) -> dict[str, frozenset[str]]:
    """Per tier of the series table, the classes it fixes."""
    known(f"target {name}: field fixes: tier", fixes, tuple(series))
    parsed = {}
    for tier in series:
        classes = fixes.get(tier)
        if not isinstance(classes, list):
            raise TargetError(
                f"target {name}: field fixes.{tier} must list the classes the "
                f"{tier} tier fixes (K1-K7), [] for none"
            )
        known(f"target {name}: field fixes.{tier}: class", classes, tuple(CLASSES))
        parsed[tier] = frozenset(classes)
    return parsed


def parse_streams(name: str, streams: object, series: dict) -> dict[str, str]:
    """Per tier of the series table, what its stream is (STREAMS)."""
    where = f"target {name}: field streams"
    if not isinstance(streams, dict):
        raise TargetError(f"{where} must be a table")
    known(f"{where}: tier", streams, tuple(series))
    known(f"{where}: stream", streams.values(), STREAMS)
    return {tier: streams.get(tier, STREAMS[0]) for tier in series}
