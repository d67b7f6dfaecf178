"""Port fields the API server would reject: not integers, out of range, or incomplete."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster


@register("invalid-port")
def invalid_port(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for subject in (*cluster.workloads, *cluster.services):
        for invalid in subject.invalid_ports:
            yield Hit(subject, invalid.field_path, invalid.message + ".")
