"""One finding of the stream checker (harness.contract.checker): the rule
it breaks, where, and the hashes that witness it.

Kept apart from the replay so that the checks at a quiet point or at the
end of a stream (harness.contract.quiet) and the reports that read findings
need not import the replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.wire import ExternalBlockHash, short_hash

ViewKey = tuple[str | None, int | None]


@dataclass(frozen=True)
class Violation:
    """One breach of a rule, with the hashes that witness it.

    ``batch`` and ``event`` locate the event at fault (None for findings that
    belong to the end of the stream or to a pool snapshot).
    """

    rule: str
    batch: int | None
    event: int | None
    hashes: tuple[ExternalBlockHash | None, ...]
    detail: str
    # What the stream shows about the cause, where the checker can tell:
    # for C1 with ancestry tracked, PARENT_NEVER_REPORTED or PARENT_REMOVED.
    cause: str | None = None
    # The view (medium, group) of the event at fault, or of a pool
    # snapshot's finding (C6).
    view: ViewKey | None = None
    # The class whose shape the finding has, as far as the stream shows
    # (K6_SHAPE), or None.
    shape: str | None = None

    def __str__(self) -> str:
        where = "end of stream" if self.batch is None else f"batch {self.batch}"
        if self.event is not None:
            where += f" event {self.event}"
        witness = " ".join(short_hash(h) for h in self.hashes)
        cause = f" ({self.cause})" if self.cause else ""
        return f"{self.rule} at {where}: {self.detail}{cause} [{witness}]"


# Why a store's parent is not live, as far as the stream shows (C1).
PARENT_NEVER_REPORTED = "never reported"
PARENT_REMOVED = "reported and removed before"


def view_order(key: ViewKey) -> tuple:
    """Views in one order whatever their mix of None and values (a stream may
    name a medium in some stores and none in others): by medium, then group
    number, None first, and by repr for anything else."""
    medium, group = key
    return (
        medium is not None,
        medium if isinstance(medium, str) else "",
        group is not None,
        group if isinstance(group, int) else 0,
        repr(key),
    )


class Positions:
    """Where an event is in its batch, by identity: looked up only when a
    violation is found there, so that the replay keeps no index per event
    (each decoded event is an object of its own; an object a batch holds
    twice is placed at its first). The batch's index is built at its first
    violation and kept for the next ones, so that N violations in one
    batch cost one pass over it, not N."""

    def __init__(self):
        self.events: list | None = None
        self.index: dict[int, int] = {}

    def __call__(self, events: list, event) -> int:
        number = self.index.get(id(event)) if events is self.events else None
        if number is None or number >= len(events) or events[number] is not event:
            self.events = events  # a new batch, or one changed since
            self.index = {}
            for number in range(len(events) - 1, -1, -1):
                self.index[id(events[number])] = number
            number = self.index[id(event)]
        return number
