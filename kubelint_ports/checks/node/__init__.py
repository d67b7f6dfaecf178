"""The node-snapshot rules (KP8xx, `kubelint-ports node`): a live node diagnosed from its own dumps
(incidents 000-003). They read `model.node_state.NodeSnapshots` (`reads: node-snapshot` in their
policies) and point at the dump line of the rule, socket or lease at fault; `lint` never imports
this room.

- `host_ports` (KP801-KP803): the hostPort DNAT entries against the pods, each other and
  kube-proxy's jump.
- `kube_proxy` (KP804): kube-proxy's masquerade rule.
- `listeners` (KP805): the node's listening sockets against DNATs and nodePorts.
- `drift` (KP806): the nodes against each other.
- `dump_context`: what they share (a finding's subject at a dump line, the model's answer for a
  node, the names of entries and Service rules); no rule.
- `phrases`: their stories, every word about a packet's fate on a live node.

Who receives a packet is the datapath model's answer (`model.datapath`), given the facts the
node's own dumps establish (`model.datapath.node.node_facts`: kube-proxy's mode, how hostPorts are
implemented, the observed jump order).
"""
