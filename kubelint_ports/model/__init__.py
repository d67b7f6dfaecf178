"""Documents -> the cluster model the checks read (workloads, Services, their port claims)."""

from kubelint_ports.model.build import build_cluster
from kubelint_ports.model.objects import Cluster, ClusterFacts, HostClaim, NodePortClaim, Service, Workload

__all__ = ["Cluster", "ClusterFacts", "HostClaim", "NodePortClaim", "Service", "Workload", "build_cluster"]
