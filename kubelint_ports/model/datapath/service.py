"""A Service as the datapath model sees it: its traffic policies and whether it has endpoints,
folded into the `PortUse` the rules ask about."""

from __future__ import annotations

from dataclasses import replace

from kubelint_ports.model.datapath.facts import PortUse
from kubelint_ports.model.objects import Cluster, Service
from kubelint_ports.model.selection import has_endpoints

def traffic_policies(service: Service) -> tuple[bool, bool]:
    """(externalTrafficPolicy is Local, internalTrafficPolicy is Local), as the model read them."""
    return service.external_local, service.internal_local


def service_use(cluster: Cluster, service: Service | None, use: PortUse) -> PortUse:
    """`use` with the Service's endpoints and traffic policies filled in (None: a Service that is
    not among the inputs, such as the default ones every cluster has)."""
    if service is None:
        return replace(use, endpoints=True if use.endpoints is None else use.endpoints)
    external, internal = traffic_policies(service)
    endpoints = has_endpoints(cluster, service)
    return replace(use, endpoints=endpoints, external_local=external, internal_local=internal,
                   local_endpoints=False if endpoints is False else None)
