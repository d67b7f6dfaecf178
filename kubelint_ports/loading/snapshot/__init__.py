"""Node snapshots: per-node directories of dumps (iptables-save, nft, ipvsadm, ipset, ss, ip addr,
the host-local IPAM directory, crictl pods), each file recognised by its content."""

from kubelint_ports.loading.snapshot.detect import KINDS, detect
from kubelint_ports.loading.snapshot.read import Snapshot, load_snapshot, read_file
from kubelint_ports.loading.snapshot.dump_records import DumpLine

__all__ = ["KINDS", "DumpLine", "Snapshot", "detect", "load_snapshot", "read_file"]
