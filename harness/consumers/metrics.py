"""Counters read from a router's Prometheus text page, and read over HTTP.

Dynamo and vllm-router report what they received, filtered and applied of
the stream as Prometheus counters; the adapters count by the routers' own
names and labels rather than re-deriving them.
"""

from __future__ import annotations

import re
import urllib.request

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
