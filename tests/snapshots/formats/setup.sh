#!/bin/sh
# Rules whose dumps are committed beside this script (run inside a throwaway network namespace by
# tests/test_snapshots.py::test_real_tools_print_what_the_readers_expect; needs root).
set -e
ip link set lo up
ip link add cni0 type bridge
ip addr add 10.244.1.1/24 dev cni0
ip link set cni0 up
iptables-nft -t nat -N KUBE-SERVICES
iptables-nft -t nat -N CNI-HOSTPORT-DNAT
iptables-nft -t nat -N CNI-DN-04579c7bb67f4c3f6cca0
iptables-nft -t nat -N KUBE-MARK-MASQ
iptables-nft -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
iptables-nft -t nat -A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
iptables-nft -t nat -A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"cbr0\" id: \"abc\"" -m multiport --dports 8082,443 -j CNI-DN-04579c7bb67f4c3f6cca0
iptables-nft -t nat -A CNI-DN-04579c7bb67f4c3f6cca0 -p tcp -m tcp --dport 8082 -j DNAT --to-destination 10.4.0.10:80
iptables-nft -t nat -A CNI-DN-04579c7bb67f4c3f6cca0 -s 10.4.0.0/16 -d 1.2.3.4/32 -p tcp -m tcp --dport 443 -j DNAT --to-destination 10.4.0.10:443
ipset create KUBE-CLUSTER-IP hash:ip,port
ipset add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
iptables-nft -t nat -A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
iptables-nft -t nat -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
iptables-nft -t filter -N KUBE-EXTERNAL-SERVICES
iptables-nft -t filter -A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "ns/svc:http has no endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 30081 -j REJECT --reject-with icmp-port-unreachable
iptables-legacy -t nat -N KUBE-SERVICES
iptables-legacy -t nat -A PREROUTING -j KUBE-SERVICES
nft -f "$(dirname "$0")/rules.nft"
