"""The rules checked at a point, not at an event: C5 once the stream has
evicted everything, C6 against a snapshot of the pool at a quiet point.

A mixin of the stream checker (harness.contract.checker), which holds the
views these read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.contract.violation import ViewKey, Violation
from harness.contract.wire import ExternalBlockHash


class QuietChecks:
    """`StreamChecker`'s C5 and C6: its ``views`` and ``stored`` read, its
    ``_keep`` told what they find."""

    def check_pool(self, held: Mapping[ViewKey, Iterable[ExternalBlockHash]]) -> None:
        """C6: compare the views with the hashes a pool holds at a quiet point.

        Every held hash must be live; every live hash the pool does not hold
        must be an ancestor (through live parents) of a held hash.
        """
        if not self.track_ancestry:
            raise ValueError("check_pool needs StreamChecker(track_ancestry=True)")
        batch = self.batches - 1
        for key in sorted(set(self.views) | set(held), key=repr):
            live = self.views.get(key, {})
            stored = self.stored.get(key, {})
            held_hashes = set(held.get(key, ()))
            reachable = set()
            for block_hash in held_hashes:
                if block_hash not in live:
                    self._keep(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: pool holds a hash that is not live",
                            view=key,
                        )
                    )
                    continue
                parent = stored[block_hash][0]
                while parent in live and parent not in reachable:
                    reachable.add(parent)
                    parent = stored[parent][0]
            for block_hash in live:
                if block_hash not in held_hashes and block_hash not in reachable:
                    self._keep(
                        Violation(
                            "C6",
                            batch,
                            None,
                            (block_hash,),
                            f"view {key}: live hash stored in batch "
                            f"{stored[block_hash][1]} is neither held by the pool "
                            "nor an ancestor of a held hash",
                            view=key,
                        )
                    )

    def check_drained(self) -> None:
        """C5: the stream evicted everything, so every view must be empty."""
        for key, live in sorted(self.views.items(), key=lambda item: repr(item[0])):
            stored = self.stored.get(key, {})
            for block_hash, count in live.items():
                origin = (
                    f"; stored in batch {stored[block_hash][1]}"
                    if block_hash in stored
                    else ""
                )
                self._keep(
                    Violation(
                        "C5",
                        None,
                        None,
                        (block_hash,),
                        f"view {key}: still live x{count} after eviction "
                        f"of everything{origin}",
                    )
                )

    def live_count(self, key: ViewKey, block_hash: ExternalBlockHash) -> int:
        return self.views.get(key, {}).get(block_hash, 0)
