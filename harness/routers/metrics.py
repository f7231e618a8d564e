"""Counters read from a router's Prometheus text page, and read over HTTP.

Dynamo and vllm-router report what they received, filtered and applied of
the stream as Prometheus counters; the adapters count by the routers' own
names and labels rather than re-deriving them; `dynamo_ledger` names
Dynamo's.
"""

from __future__ import annotations

import re
import urllib.request
from collections import Counter

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line of a Prometheus page."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        found.append((name, dict(_LABEL.findall(labels or "")), number))
    return found


def select(
    found: list[tuple[str, dict[str, str], float]], name: str, **labels: str
) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` whose labels include ``labels``."""
    return [
        (have, value)
        for sample_name, have, value in found
        if sample_name == name and all(have.get(k) == v for k, v in labels.items())
    ]


def total(found, name: str, **labels: str) -> int:
    return int(sum(value for _, value in select(found, name, **labels)))


def fetch(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


# Dynamo's counters the ledger names (harness.routers.dynamo_relay): (metric,
# label that names the reason, how the ledger names it)
LEDGER_METRICS = (
    ("kv_publisher_zmq_events_total", "stage", "relay {stage} {event_type}"),
    (
        "kv_publisher_zmq_filtered_events_total",
        "reason",
        "relay filtered {event_type}: {reason}",
    ),
    (
        "kv_publisher_zmq_suspicious_events_total",
        "reason",
        "relay forwarded {event_type} with no block: {reason}",
    ),
    (
        "kv_publisher_zmq_conversion_issues_total",
        "reason",
        "relay could not convert {event_type}: {reason}",
    ),
    ("kv_cache_events_applied", "status", "indexer {event_type}: {status}"),
)


def dynamo_ledger(found) -> Counter:
    """Dynamo's counters of one namespace, by the ledger's names (nonzero)."""
    ledger = Counter()
    for name, _, template in LEDGER_METRICS:
        for labels, value in select(found, name):
            if value:
                ledger[template.format_map(_Labels(labels))] += int(value)
    return ledger


class _Labels(dict):
    def __missing__(self, key: str) -> str:
        return "?"
