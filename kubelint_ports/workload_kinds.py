"""The kinds that make pods and where their pod template is: the one kind table.

The model reads workloads from these kinds (`model.build`); the network readers look in the same
pod specs for cluster components (`loading.cluster.component_pods`: kube-proxy, the control plane, CNI
installers).
"""

from __future__ import annotations

ONE_PER_NODE = "one pod per eligible node"  # a replicas "path" that is no path: the DaemonSet shape
# kind -> (pod spec path, replicas path or None for "one pod", or ONE_PER_NODE)
WORKLOAD_KINDS = {
    "Pod": ("spec", None),
    "Deployment": ("spec.template.spec", "spec.replicas"),
    "ReplicaSet": ("spec.template.spec", "spec.replicas"),
    "StatefulSet": ("spec.template.spec", "spec.replicas"),
    "ReplicationController": ("spec.template.spec", "spec.replicas"),
    "DaemonSet": ("spec.template.spec", ONE_PER_NODE),
    "Job": ("spec.template.spec", "spec.parallelism"),
    "CronJob": ("spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.parallelism"),
}
# Only the built-in API groups: a CRD may reuse a kind name (Knative's `Service`).
CORE_GROUPS = frozenset(("", "apps", "extensions", "batch"))
# Custom resources whose controllers make pods from an embedded pod template, by (group, kind).
# The config's `pod-templates` adds kinds (and may reshape these).
CUSTOM_WORKLOAD_KINDS = {
    ("argoproj.io", "Rollout"): ("spec.template.spec", "spec.replicas"),  # Argo Rollouts
    ("apps.kruise.io", "CloneSet"): ("spec.template.spec", "spec.replicas"),  # OpenKruise
    ("apps.kruise.io", "StatefulSet"): ("spec.template.spec", "spec.replicas"),  # Advanced StatefulSet
    ("apps.kruise.io", "DaemonSet"): ("spec.template.spec", ONE_PER_NODE),  # Advanced DaemonSet
}
# Pods that run to completion: a cluster component started there (`kube-proxy --cleanup` in a
# Job) says nothing of how the running cluster is configured.
RUN_TO_COMPLETION = frozenset(("Job", "CronJob"))


def is_workload(group: str, kind: str) -> bool:
    """A built-in kind that makes pods (`WORKLOAD_KINDS`)."""
    return kind in WORKLOAD_KINDS and group in CORE_GROUPS


def runs_components(group: str, kind: str) -> bool:
    """A built-in kind whose pods may run a cluster component for good (not a Job's)."""
    return is_workload(group, kind) and kind not in RUN_TO_COMPLETION
