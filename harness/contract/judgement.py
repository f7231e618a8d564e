"""What a checked stream's findings mean, for the tier its engine runs and
for the consumer it is judged for: check-stream's report and status.

The checker (harness.contract.checker) counts every finding, by view, rule
and shape. A `Judgement` sorts them three ways:

- **violations**: what makes the exit status 1;
- **kept as released**: the C1 findings of K6's shape where the tier keeps
  K6 as released and fixes every other class that breaks C1 (the strict
  tier, `keeps_k6`), and no consumer is named: not a violation of that
  tier's contract (docs/contract.md, class K6);
- **left out**: what the named consumer does not read (its `Reading`):
  the views it drops and the events of them, the stores it drops for their
  block size, the rules whose breach does not change what it holds.

With a consumer named, the question is that consumer's, not the tier's: a
store it refuses is a violation whether the tier keeps it as released or
not, and the report says which of them have K6's shape.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.contract import title
from harness.contract.checker import OTHER_BLOCK_SIZE, StreamChecker, view_order
from harness.contract.reading import HASHLESS_SHAPE, K6_SHAPE, keeps_k6
from harness.log import shown

K6_KEPT = (
    "class K6: a store in a sliding-window or Mamba group whose parent the "
    "pool let go before its call (a block skipped or dropped before it), "
    "named as released; docs/contract.md, class K6"
)
K6_SHAPE_SAYS = (
    "a store of a sliding-window or Mamba group whose tokens span its hashes, "
    "its parent not live"
)


@dataclass(frozen=True)
class Tier:
    """The tier the stream's engine runs, as the check was told it: ``name``
    (default, strict, released, or None where it was not told), by whom,
    and the classes it fixes."""

    name: str | None
    told_by: str = ""
    fixes: frozenset[str] = frozenset()

    @property
    def keeps_k6(self) -> bool:
        return self.name is not None and keeps_k6(self.fixes)

    def line(self) -> str | None:
        if self.name is None:
            return None
        if self.keeps_k6:
            keeps = (
                "it fixes every class that breaks C1 but K6, which it keeps as released"
            )
        else:
            fixed = ", ".join(sorted(self.fixes)) or "no class"
            keeps = f"it fixes {fixed}: a C1 of K6's shape may be K4 there, judged"
        return f"  tier: {self.name} ({self.told_by}); {keeps}"


@dataclass
class Judgement:
    """A checker's findings for a tier and, where named, one consumer."""

    checker: StreamChecker
    tier: Tier

    def _sort(self, view, rule: str, shape: str | None) -> str:
        """'violation', 'kept' or 'left out' for a finding."""
        reading = self.checker.reading
        if reading is not None:
            if shape == HASHLESS_SHAPE:
                return "violation"
            if view in self.checker.skipped or rule not in reading.rules:
                return "left out"
            return "violation"
        if rule == "C1" and shape == K6_SHAPE and self.tier.keeps_k6:
            return "kept"
        return "violation"

    def counts(self, sort: str) -> Counter:
        """Per rule, the findings sorted as ``sort``; C5 (the end of the
        stream, no view) is always a violation."""
        found = Counter()
        for (view, rule, shape), count in self.checker.view_counts.items():
            if self._sort(view, rule, shape) == sort:
                found[rule] += count
        if sort == "violation" and self.checker.counts["C5"]:
            found["C5"] = self.checker.counts["C5"]
        return found

    @property
    def violation_count(self) -> int:
        return sum(self.counts("violation").values())

    def k6_shaped(self) -> int:
        """The C1 violations of K6's shape (none where they are kept)."""
        return sum(
            count
            for (view, rule, shape), count in self.checker.view_counts.items()
            if rule == "C1"
            and shape == K6_SHAPE
            and self._sort(view, rule, shape) == "violation"
        )

    def witnesses(self, rule: str, sort: str) -> list:
        return [
            violation
            for violation in self.checker.violations
            if violation.rule == rule
            and (
                violation.view is None
                or self._sort(violation.view, rule, violation.shape) == sort
            )
        ]

    def lines(self) -> list[str]:
        """The report's lines after its first: the tier, the consumer, each
        rule's violations with witnesses, what was kept and left out, a line
        per view."""
        lines = [line for line in (self.tier.line(), self._consumer()) if line]
        lines += self._rules("violation")
        lines += self._kept()
        lines += self._shape_note()
        lines += self._left_out()
        lines += self._views()
        return lines

    def _consumer(self) -> str | None:
        reading = self.checker.reading
        if reading is None:
            return None
        return (
            f"  for {reading.name} ({reading.what}): judged {reading.judged}; "
            f"left out {reading.left_out}"
        )

    def _rules(self, sort: str) -> list[str]:
        lines = []
        for rule, found in sorted(self.counts(sort).items()):
            lines.append(f"  {title(rule)}: {found}")
            witnesses = self.witnesses(rule, sort)
            lines.extend(
                f"    {violation}{_shape(violation)}" for violation in witnesses
            )
            if found > len(witnesses):
                lines.append(f"    ... {found - len(witnesses)} more")
        return lines

    def _kept(self) -> list[str]:
        kept = self.counts("kept")
        if not kept:
            return []
        lines = [
            f"  kept as released by the {self.tier.name} tier, not violations of "
            f"its contract: C1 {kept['C1']}, {K6_KEPT}"
        ]
        witnesses = self.witnesses("C1", "kept")
        lines.extend(f"    {violation}" for violation in witnesses)
        if kept["C1"] > len(witnesses):
            lines.append(f"    ... {kept['C1'] - len(witnesses)} more")
        return lines

    def _shape_note(self) -> list[str]:
        shaped = self.k6_shaped()
        if not shaped:
            return []
        if self.checker.reading is not None:
            why = (
                f"{self.checker.reading.name} refuses them whatever the tier "
                "keeps (the strict tier keeps K6 as released)"
            )
        elif self.tier.name is None:
            why = (
                "only under the strict tier is that shape K6, kept as released "
                "(docs/contract.md; under another it can be K1, K2 or K4): if the "
                "engine runs the strict tier, give --tier strict or --python "
                "ENGINE-PYTHON to judge them so"
            )
        else:
            why = (
                f"the {self.tier.name} tier does not fix K4, whose stores can "
                "take the same shape: judged as violations"
            )
        return [f"  C1 of K6's shape ({K6_SHAPE_SAYS}): {shaped}; {why}"]

    def _left_out(self) -> list[str]:
        reading = self.checker.reading
        if reading is None:
            return []
        lines = [
            f"  {title(rule)}: {found}, not judged: {reading.name} does not read it"
            for rule, found in sorted(self.counts("left out").items())
        ]
        events = Counter()
        for (_, why), count in self.checker.left_out.items():
            events[why] += count
        lines.extend(
            f"  left out: {count} event(s): {_why(why, reading.name)}"
            for why, count in sorted(events.items())
        )
        return lines

    def _views(self) -> list[str]:
        """A line per view, clean or not: one pass over the counts, however
        many views there are."""
        checker = self.checker
        if len(checker.view_kinds) < 2:
            return []
        sorted_by_view: dict = {}
        for (view, rule, shape), count in checker.view_counts.items():
            sort = self._sort(view, rule, shape)
            found = sorted_by_view.setdefault(view, {}).setdefault(sort, Counter())
            found[rule] += count
        events_left = Counter()
        for (view, _), count in checker.left_out.items():
            events_left[view] += count
        lines = ["  by view (medium, group, kind): violations at events"]
        for view in sorted(checker.view_kinds, key=view_order):
            medium, group = view
            kind = checker.view_kinds[view]
            said = self._view(view, sorted_by_view.get(view, {}), events_left[view])
            view_name = f"{shown(str(medium))} group {group} ({shown(str(kind))})"
            lines.append(f"    {view_name}: {said}")
        return lines

    def _view(self, view, found: dict[str, Counter], events_left: int) -> str:
        checker = self.checker
        if view in checker.skipped:
            said = f"not read by {checker.reading.name} ({events_left} events)"
            hashless = found.get("violation")
            return said + (f"; {_rules(hashless)}" if hashless else "")
        said = _rules(found.get("violation")) or "none"
        if kept := found.get("kept"):
            said += f"; kept as released (K6): {_rules(kept)}"
        if left := found.get("left out"):
            said += f"; not judged: {_rules(left)}"
        if events_left:
            said += f"; {events_left} stores of another block size left out"
        return said


def _rules(counts: Counter | None) -> str:
    return ", ".join(
        f"{rule} {count}" for rule, count in sorted((counts or {}).items())
    )


def _shape(violation) -> str:
    if violation.shape == K6_SHAPE:
        return " (K6's shape)"
    if violation.shape == HASHLESS_SHAPE:
        return " (no hash: the whole batch is refused)"
    return ""


def _why(why: str, name: str) -> str:
    if why == OTHER_BLOCK_SIZE:
        return f"stores of another block size, which {name} drops"
    return why
