"""What one consumer reads of the stream, so that a check can judge only
that: ``check-stream --for NAME``.

A `Reading` is a filter and a choice of rules, nothing else: the views
(``(medium, group_idx)``) a consumer keeps, by the group's kind and index;
the stores it drops before its index (those of another block size than its
own); the rules whose breach changes what it holds (C1 where it refuses a
store under a parent it does not hold, C3 where it reads a store's tokens
per block; C2 always, a removal of a hash the stream never made live); and
whether one store with no hash in any group makes it refuse the whole
batch. harness.routers.readings gives the five consumers that
``fidelity --router`` measures their readings; the checker
(harness.contract.checker) applies one while it replays.

Class K6 (docs/contract.md) has a shape here too, `K6_SHAPE`: a store in a
sliding-window or Mamba group whose parent is not live and whose tokens
span its hashes. The stream cannot tell it from a K4 store that names a
block its own call skipped (both name a parent no event left live), so a
C1 of that shape is K6 only where the tier claims to fix every other class
that breaks C1 (`keeps_k6`): the strict tier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Groups whose full blocks can be null or masked: a block skipped there is
# never announced, so a later store can name it as its parent.
SPARSE_KINDS = frozenset({"sliding_window", "mamba"})
# The C1 findings the stream shows as K6's: the store of a sparse group
# whose tokens span its hashes (C3 holds), its parent not live.
K6_SHAPE = "K6"
# A store with no hash in a view the reading drops, judged (C3) because the
# consumer refuses the whole batch that holds it.
HASHLESS_SHAPE = "hashless"
# Every class that can break C1 but K6: a tier that fixes all of them keeps
# only K6's C1 (docs/contract.md, "Recognising the classes").
C1_CLASSES_BUT_K6 = frozenset({"K1", "K2", "K3", "K4", "K7"})
# The rules a reading may judge: what a replay of a capture can show (C4
# needs the engine's hash function, C5 is asked for with --expect-empty).
STREAM_RULES = ("C1", "C2", "C3")


def keeps_k6(fixes: Iterable[str]) -> bool:
    """Whether a tier that fixes ``fixes`` leaves no C1 but K6's: then a C1
    of K6's shape is K6, kept as released, not a violation of its contract."""
    return set(fixes) >= C1_CLASSES_BUT_K6 and "K6" not in set(fixes)


@dataclass(frozen=True)
class Reading:
    """What consumer ``name`` reads of the stream (module docstring).

    ``kinds``: the group kinds it keeps (None: every kind; a store that
    names no kind is kept, as from a release before ``kv_cache_spec_kind``);
    ``groups``: the group indexes it keeps (None: every group; a missing
    ``group_idx`` is 0); ``block_size``: it drops every store of another
    block size before its index (None: it keeps every size); ``rules``: the
    rules judged in the views it keeps; ``refuses_hashless_batches``: a
    store with no hash, in any group, makes it refuse the whole batch.
    ``judged`` and ``left_out`` say the same in words, for the report.
    """

    name: str
    what: str  # the consumer, in a few words
    kinds: frozenset[str] | None = None
    groups: frozenset[int] | None = None
    block_size: int | None = None
    rules: frozenset[str] = frozenset(STREAM_RULES)
    refuses_hashless_batches: bool = False
    judged: str = ""
    left_out: str = ""

    def reads_view(self, group: int | None, kind: str | None) -> bool:
        """Whether it keeps the view of group ``group``, whose stores name
        kind ``kind`` (None: not known yet, or named by none)."""
        if self.groups is not None and (group or 0) not in self.groups:
            return False
        return self.kinds is None or kind is None or kind in self.kinds

    def why_not(self, group: int | None, kind: str | None) -> str:
        """Why it does not keep that view, in a few words."""
        if self.groups is not None and (group or 0) not in self.groups:
            groups = ", ".join(map(str, sorted(self.groups)))
            return f"{self.name} reads group {groups} only"
        return f"{self.name} drops {kind} groups"
