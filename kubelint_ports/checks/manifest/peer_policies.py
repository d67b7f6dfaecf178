"""Organisation policies other linters and admission controllers enforce about ports (kube-linter,
kube-score, Polaris, Kyverno, Gatekeeper). They are choices, not mistakes: their policies ship off
by default and `rules:` in the configuration turns them on with the parameters a team wants.

Most are data: host-port-not-allowed, forbidden-service-type, privileged-port and
forbidden-container-port are `port-schema` policies (policies/KP552-KP555), their parameters
filled into a JSON Schema. host-network judges a pod, not a port, and names the ports it opens."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.checks.manifest import network_phrases as phrases
from kubelint_ports.model import Cluster


@register("host-network")
def host_network(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    for workload in cluster.workloads:
        if workload.host_network:
            ports = sorted({claim.port for claim in workload.claims})
            yield Hit(workload, f"{workload.pod_spec_path}.hostNetwork", phrases.host_network(str(workload.ref), ports))
