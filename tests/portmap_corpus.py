"""A generated cluster for the port map at scale: 500 nodes in 10 pools, 1,000 host ports.

- 100 DaemonSets without a node constraint: ports 10000-10099 on every node;
- 900 Deployments, each in one pool (nodeSelector), 2 replicas: ports 10100-10999;
- 20 of them want more pods than their pool has nodes (host-port-conflict on the pool);
- 30 pods pinned to one node each, on a DaemonSet's port (host-port-conflict on that node), so
  those nodes differ from the rest of their pool;
- 50 NodePort Services (nodePorts 30000-30049).

Deterministic: the same files every time.
"""

from __future__ import annotations

from pathlib import Path

NODES, POOLS, DAEMONSETS, DEPLOYMENTS, OVERFLOWING, PINNED, SERVICES = 500, 10, 100, 900, 20, 30, 50
FIRST_PORT = 10000


def node_name(index: int) -> str:
    return f"node-{index:03d}"


def inventory() -> str:
    items = []
    for index in range(NODES):
        items.append(f"""\
- apiVersion: v1
  kind: Node
  metadata:
    name: {node_name(index)}
    labels: {{kubernetes.io/hostname: {node_name(index)}, pool: p{index % POOLS}}}
  spec: {{}}
""")
    return "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)


def workload(kind: str, name: str, namespace: str, port: int, *, replicas: int | None = None, spec: str = "") -> str:
    replicas_line = f"  replicas: {replicas}\n" if replicas is not None else ""
    return f"""\
apiVersion: {'v1' if kind == 'Pod' else 'apps/v1'}
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}}}
spec:
{replicas_line}  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
{spec}      containers:
        - name: main
          image: registry.example/{name}:1
          ports:
            - containerPort: {port}
              hostPort: {port}
"""


def pod(name: str, namespace: str, port: int, node: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  nodeName: {node}
  containers:
    - name: main
      image: registry.example/{name}:1
      ports:
        - containerPort: {port}
          hostPort: {port}
"""


def manifests() -> str:
    documents = []
    for index in range(DAEMONSETS):
        documents.append(workload("DaemonSet", f"agent-{index:03d}", f"ns-{index % 7}", FIRST_PORT + index))
    for index in range(DEPLOYMENTS):
        pool = index % POOLS
        replicas = NODES // POOLS + 10 if index < OVERFLOWING else 2
        documents.append(workload("Deployment", f"app-{index:03d}", f"ns-{index % 7}", FIRST_PORT + DAEMONSETS + index,
                                  replicas=replicas, spec=f"      nodeSelector: {{pool: p{pool}}}\n"))
    for index in range(PINNED):
        documents.append(pod(f"pinned-{index:02d}", "debug", FIRST_PORT + index, node_name(index * 13)))
    for index in range(SERVICES):
        documents.append(f"""\
apiVersion: v1
kind: Service
metadata: {{name: svc-{index:02d}, namespace: ns-{index % 7}}}
spec:
  type: NodePort
  selector: {{app: app-{index:03d}}}
  ports: [{{port: 80, nodePort: {30000 + index}}}]
""")
    return "---\n".join(documents)


def write(folder: Path) -> tuple[Path, Path]:
    """The manifests and the node inventory, written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest_file, nodes_file = folder / "cluster.yaml", folder / "nodes.yaml"
    manifest_file.write_text(manifests(), encoding="utf-8")
    nodes_file.write_text(inventory(), encoding="utf-8")
    return manifest_file, nodes_file
