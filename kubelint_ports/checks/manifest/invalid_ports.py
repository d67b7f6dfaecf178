"""Port fields the API server would reject: not integers, out of range, or incomplete."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest import phrases
from kubelint_ports.model import Cluster


@register("invalid-port")
def invalid_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for subject, rejected in (*((w, "the pod") for w in cluster.workloads),
                              *((s, "the Service") for s in cluster.services)):
        for invalid in subject.invalid_ports:
            yield Hit(subject, invalid.field_path, phrases.invalid_port(invalid.message, rejected))
