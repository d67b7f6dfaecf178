"""The manifest rules (KP0xx-KP5xx, `kubelint-ports lint`): checks of the cluster model built from
manifests, `--cluster` and `--nodes` files (`model.Cluster`; `reads: cluster` in their policies).

- `invalid_ports`, `api_validation` (KP001-KP004): what the API server would refuse.
- `host_ports`, `init_container_ports` (KP101-KP104): one object's host ports.
- `ephemeral_ports` (KP105, KP106, KP205): ports inside the nodes' ephemeral range.
- `node_ports` (KP201-KP204): host ports against nodePorts and the nodePort range.
- `node_model`, `node_addresses` (KP301-KP306): pods placed on nodes, their claims against each
  other, the node's reserved ports, Services' ports and addresses.
- `network_config` (KP400-KP405): kube-proxy's configuration and the cluster's CIDRs.
- `service_routing` (KP501-KP505): Services against the pods they select.
- `peer_policies`, `port_schema` (KP551-KP555): organisation policies other tools enforce, and the
  declarative `port-schema` check (a JSON Schema per port or Service) policies of one's own use.
- `traffic`: what the node-traffic rules ask the datapath model; no rule.
- `phrases`: their stories, every word about a packet's fate.
"""
