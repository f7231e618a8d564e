"""A pool-2x6 workload run with probes, built by hand: blocks of 6 tokens
hashed every 2, so hash ``H[i]`` ends at token ``2 * (i + 1)``."""

from harness.contract.records import OpRecord, Probe, ProbeSetup
from support.events import labelled, run_start

H = [100 + index for index in range(9)]
START = run_start(seed=0, ops=2)
SETUP = ProbeSetup(probes_per_op=1, seed=0, alignment=2, sliding_windows=[None])


def probe(num_tokens, hit, origin="prompt"):
    """A probe of the first ``num_tokens`` tokens, the engine's hit ``hit``."""
    return Probe(origin, list(range(num_tokens)), H[: num_tokens // 2], hit, [hit])


def op(index, *events):
    """One operation's events, in the full-attention group."""
    return OpRecord(index, "new", [labelled("full@full_attention", e) for e in events])
