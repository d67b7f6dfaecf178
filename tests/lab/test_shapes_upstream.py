"""The lab's kube-proxy rules (shapes.py) against what kube-proxy itself says it writes.

`kube_proxy_expectations/` holds kube-proxy's expected rule dumps from its `proxier_test.go`
files and, where no test spells a shape out, the rules read from its source (README.md there says
which is which, with commits). Each test builds the same Services with shapes.py and diffs the
parts that decide who gets a packet, after normalising what does not:

- chain names: KUBE-SVC/SVL/EXT/FW/SEP-<hash> and the nftables `service-/external-/local-/
  endpoint-/firewall-<hash>-` names become the Service (and endpoint) they belong to;
- comments, `/32`, REJECT's default `--reject-with`, the spelling of marks and probabilities;
- metrics and session affinity, which pick among the same endpoints and never change the winner:
  nfacct matches (and KUBE-NODEPORTS' nfacct-counting copy of the next rule), `-m recent`,
  nftables `affinity-` sets;
- order where it does not matter: KUBE-SERVICES' Service rules, KUBE-NODEPORTS, the filter
  REJECT/DROP chains, map elements. Order is kept where it does: the KUBE-NODEPORTS tail call last
  in KUBE-SERVICES, every KUBE-EXT-/KUBE-SVC-/KUBE-SEP- chain, KUBE-FORWARD, the IPVS chains, the
  jumps from PREROUTING/OUTPUT/INPUT/FORWARD (as prepended, in order).

The last test loads every new shape into a lab node: the kernel must accept them.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import netlab
import pytest
import shapes
from shapes import LOCAL, Endpoint, LabService

DATA = Path(__file__).resolve().with_name("kube_proxy_expectations")


def data(name: str) -> str:
    """A data file without its header (and any `#` line)."""
    return "".join(line for line in (DATA / name).read_text(encoding="utf-8").splitlines(keepends=True)
                   if not line.startswith("#"))


# --- the Services of the upstream tests ---------------------------------------------------------

def overall_services() -> list[LabService]:
    """TestOverallIPTablesRules / TestOverallNFTablesRules (header of the data files)."""
    def ep(ip: str, local: bool = False) -> tuple[Endpoint, ...]:
        return (Endpoint(ip, 80, local),)
    return [
        LabService("ns1", "svc1", "p80", "tcp", "172.30.0.41", 80, endpoints=ep("10.180.0.1")),
        LabService("ns2", "svc2", "p80", "tcp", "172.30.0.42", 80, 3001, ep("10.180.0.2"), ("192.168.99.22",),
                   load_balancer_ips=("1.2.3.4",), external_policy=LOCAL, health_check_node_port=30000),
        LabService("ns3", "svc3", "p80", "tcp", "172.30.0.43", 80, 3003, ep("10.180.0.3")),
        LabService("ns4", "svc4", "p80", "tcp", "172.30.0.44", 80, None,
                   (Endpoint("10.180.0.4", 80, False), Endpoint("10.180.0.5", 80, True)), ("192.168.99.33",)),
        LabService("ns5", "svc5", "p80", "tcp", "172.30.0.45", 80, 3002, ep("10.180.0.3"),
                   load_balancer_ips=("5.6.7.8",), source_ranges=(" 203.0.113.0/25",), health_check_node_port=30000),
        LabService("ns6", "svc6", "p80", "tcp", "172.30.0.46", 80),
    ]


def policy_services() -> list[LabService]:
    """iptables-/nftables-syncProxyRules.source.txt: the Local policies, with and without local endpoints."""
    return [
        LabService("ns1", "svca", "p80", "tcp", "172.30.0.51", 80, 3051,
                   (Endpoint("10.180.0.1", 80, True), Endpoint("10.180.2.1", 80, False)), external_policy=LOCAL),
        LabService("ns1", "svcb", "p80", "tcp", "172.30.0.52", 80, None, (Endpoint("10.180.2.2", 80, False),),
                   internal_policy=LOCAL),
        LabService("ns1", "svcc", "p80", "tcp", "172.30.0.53", 80, None,
                   (Endpoint("10.180.0.3", 80, True), Endpoint("10.180.2.3", 80, False)), internal_policy=LOCAL),
    ]


def ipvs_services() -> list[LabService]:
    """ipvs-writeIptablesRules.source.txt."""
    return [
        LabService("ns1", "svc1", "p80", "tcp", "10.20.30.41", 80, 3001, (Endpoint("10.180.0.1", 80, True),),
                   ("192.168.99.11",), ("1.2.3.4",), ("203.0.113.0/25",), LOCAL, health_check_node_port=30000),
        LabService("ns2", "svc2", "dns", "udp", "10.20.30.42", 53, 3002, (Endpoint("10.180.0.2", 53, False),),
                   ("192.168.99.12",)),
    ]


def ipvs_1_10_services() -> list[LabService]:
    """ipvs-v1.10-syncProxyRules.source.txt."""
    return [
        LabService("ns1", "svc1", "p80", "tcp", "10.20.30.41", 80, 3001,
                   (Endpoint("10.180.0.1", 80, True), Endpoint("10.180.1.1", 80, False)), ("192.168.99.11",),
                   external_policy=LOCAL),
        LabService("ns2", "svc2", "dns", "udp", "10.20.30.42", 53, 3002, (Endpoint("10.180.0.2", 53, False),),
                   ("192.168.99.12",)),
    ]


# --- iptables-restore text, normalised ----------------------------------------------------------

SERVICE_CHAIN = re.compile(r"KUBE-(?:SVC|SVL|EXT|FW|SEP)-[A-Z2-7]{16}")
DROPPED_MODULES = {"comment": {"--comment"}, "nfacct": {"--nfacct-name"},
                   "recent": {"--name", "--set", "--rcheck", "--seconds", "--reap"}}


def chain_names(services: list[LabService]) -> dict[str, str]:
    """Hashed chain name -> the Service (and endpoint) it belongs to, by kube-proxy's hashing."""
    names = {}
    for service in services:
        who = f"{service.port_label}/{service.protocol}"
        for prefix in ("SVC", "SVL", "EXT", "FW"):
            names[shapes.svc_chain(service, f"KUBE-{prefix}-")] = f"KUBE-{prefix}({who})"
        for endpoint in service.endpoints:
            names[shapes.sep_chain(service, endpoint)] = f"KUBE-SEP({who}->{endpoint.ip}:{endpoint.port})"
    return names


def parse_restore(text: str) -> dict[str, dict]:
    """table -> {"chains": [...], "rules": {chain: [rule text after the chain name]}}"""
    tables: dict[str, dict] = {}
    table = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("*"):
            table = line[1:]
            tables[table] = {"chains": [], "rules": {}}
        elif line.startswith(":"):
            tables[table]["chains"].append(line[1:].split()[0])
        elif line.startswith("-A "):
            chain, _, rest = line[3:].partition(" ")
            tables[table]["rules"].setdefault(chain, []).append(rest)
    return tables


def groups(rule: str) -> list[list[str]]:
    """An iptables rule as option groups (`! -s 10.0.0.0/8`, `-m tcp`, `--dport 80`, ...)."""
    found: list[list[str]] = []
    negate = False
    for token in shlex.split(rule):
        if token == "!":
            negate = True
        elif token.startswith("-") and not token[1:].isdigit():
            found.append([("!" if negate else "") + token])
            negate = False
        else:
            found[-1].append(token)
    return found


def value(token: str, names: dict[str, str]) -> str:
    token = SERVICE_CHAIN.sub(lambda match: names.get(match.group(0), match.group(0)), token)
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+/32", token):
        token = token[:-3]
    if re.fullmatch(r"0x[0-9a-fA-F]+(/0x[0-9a-fA-F]+)?", token):
        token = "/".join(hex(int(part, 16)) for part in token.split("/"))
    if re.fullmatch(r"0\.\d+", token):
        token = f"{float(token):.6f}"
    return token


def canonical(rule: str, names: dict[str, str]) -> str:
    """The rule's matches and target, sorted, without what never decides the packet's fate."""
    kept, module = [], ""
    for group in groups(rule):
        flag = group[0].lstrip("!")
        if flag == "-m":
            module = group[1]
            if module in DROPPED_MODULES:
                continue
        elif flag in DROPPED_MODULES.get(module, ()):
            continue
        elif group == ["--reject-with", "icmp-port-unreachable"]:
            continue
        kept.append(" ".join(value(token, names) for token in group))
    return " ".join(sorted(kept))


def relevant(table: str, chain: str, rule: str) -> bool:
    if "--rcheck" in rule:  # session affinity's "same endpoint as last time" rule
        return False
    return not (table == "nat" and chain == "KUBE-NODEPORTS" and "nfacct" in rule)  # a counting copy of the next


IPTABLES_UNORDERED = {("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES"), ("filter", "KUBE-EXTERNAL-SERVICES"),
                      ("filter", "KUBE-NODEPORTS"), ("filter", "KUBE-PROXY-FIREWALL")}


def differences(upstream: str, ours: str, names: dict[str, str], *, unordered=IPTABLES_UNORDERED,
                tail: str | None = "KUBE-NODEPORTS") -> list[str]:
    """What differs, chain by chain, after normalising; [] when the two write the same rules."""
    theirs_tables, our_tables = parse_restore(upstream), parse_restore(ours)
    found = []
    for table in sorted(theirs_tables.keys() | our_tables.keys()):
        theirs = theirs_tables.get(table, {"chains": [], "rules": {}})
        mine = our_tables.get(table, {"chains": [], "rules": {}})
        chains_theirs = {value(chain, names) for chain in theirs["chains"]}
        chains_mine = {value(chain, names) for chain in mine["chains"]}
        if chains_theirs != chains_mine:
            found.append(f"{table} chains: upstream only {sorted(chains_theirs - chains_mine)}, "
                         f"ours only {sorted(chains_mine - chains_theirs)}")
        for chain in sorted({value(c, names) for c in theirs["rules"].keys() | mine["rules"].keys()}):
            def rules(side: dict) -> list[str]:
                return [canonical(rule, names) for raw, listed in side["rules"].items() if value(raw, names) == chain
                        for rule in listed if relevant(table, raw, rule)]
            a, b = rules(theirs), rules(mine)
            if tail and (table, chain) == ("nat", "KUBE-SERVICES"):
                for side, listed in (("upstream", a), ("ours", b)):
                    calls = [index for index, rule in enumerate(listed) if f"-j {tail}" in rule]
                    if calls and calls != list(range(len(listed) - len(calls), len(listed))):
                        found.append(f"nat KUBE-SERVICES ({side}): the {tail} call is not last")
                a, b = sorted(a), sorted(b)
            elif (table, chain) in unordered:
                a, b = sorted(a), sorted(b)
            if a != b:
                only_a, only_b = Counter(a) - Counter(b), Counter(b) - Counter(a)
                found.append(f"{table} {chain}: upstream only {sorted(only_a.elements())}, ours only "
                             f"{sorted(only_b.elements())}" + ("" if only_a or only_b else " (order differs)"))
    return found


# --- iptables mode ------------------------------------------------------------------------------

def test_chain_hashes_are_kube_proxys():
    """Every hashed chain name in the upstream dump is one our hashing gives for its Service, and
    the Service it maps to is the one its rules' comments name."""
    names = chain_names(overall_services())
    dump = parse_restore(data("iptables-TestOverallIPTablesRules.txt"))
    seen = set()
    for table in dump.values():
        for chain in (*table["chains"], *table["rules"]):
            for name in SERVICE_CHAIN.findall(chain):
                assert name in names, f"{name}: not a hash of any of the test's Services"
                seen.add(name)
        for chain, rules in table["rules"].items():
            if chain in names:
                label = names[chain].split("(", 1)[1].split("/tcp", 1)[0]
                assert all(label in rule for rule in rules if "--comment" in rule), chain
    assert len(seen) == 16  # 5 KUBE-SVC, 4 KUBE-EXT, 1 KUBE-FW, 6 KUBE-SEP


def test_iptables_overall_rules_match_kube_proxys_test():
    """TestOverallIPTablesRules: ClusterIP, eTP Local LoadBalancer without a local endpoint
    (KUBE-EXT- without its last jump, KUBE-EXTERNAL-SERVICES DROPs), NodePort, externalIP,
    loadBalancerSourceRanges (KUBE-FW-, KUBE-PROXY-FIREWALL), no endpoints (REJECT), KUBE-FORWARD's
    INVALID drop, KUBE-FIREWALL."""
    services = overall_services()
    ours = shapes.iptables_mode(services, cluster_cidr="10.0.0.0/8", filter_rules=True, node_ip="192.168.0.2")
    assert differences(data("iptables-TestOverallIPTablesRules.txt"), ours, chain_names(services)) == []


def test_iptables_local_policies_and_node_port_addresses_match_the_source():
    """KUBE-SVL-, the eTP Local KUBE-EXT- with its final jump, iTP Local (KUBE-SVL- as the
    ClusterIP target, DROP without a local endpoint), one `-d IP` tail call per nodePortAddress."""
    services = policy_services()
    ours = shapes.iptables_mode(services, cluster_cidr="10.0.0.0/8", filter_rules=True,
                                node_port_addresses=("192.168.0.2", "127.0.0.1"))
    assert differences(data("iptables-syncProxyRules.source.txt"), ours, chain_names(services)) == []


def test_iptables_node_port_addresses_skip_loopback_without_localhost_node_ports():
    ours = shapes.iptables_mode([], node_port_addresses=("192.168.0.2", "127.0.0.1"), localhost_node_ports=False)
    assert [rule for rule in ours.splitlines() if "KUBE-NODEPORTS" in rule and rule.startswith("-A")] == [
        f"-A KUBE-SERVICES {shapes.NODEPORTS_COMMENT} -d 192.168.0.2/32 -j KUBE-NODEPORTS"]


GO_JUMP = re.compile(r'\{utiliptables\.Table(\w+), (\w+), utiliptables\.Chain(\w+), "([^"]*)", '
                     r'(nil|\[\]string\{(.*)\})\}')
GO_IPVS_JUMP = re.compile(r'\{utiliptables\.Table(\w+), utiliptables\.Chain(\w+), (\w+), "([^"]*)"\}')
GO_CHAINS = {
    "kubeServicesChain": "KUBE-SERVICES", "kubeExternalServicesChain": "KUBE-EXTERNAL-SERVICES",
    "kubeNodePortsChain": "KUBE-NODEPORTS", "kubePostroutingChain": "KUBE-POSTROUTING",
    "kubeForwardChain": "KUBE-FORWARD", "kubeProxyFirewallChain": "KUBE-PROXY-FIREWALL",
    "kubeletFirewallChain": "KUBE-FIREWALL", "kubeNodePortChain": "KUBE-NODE-PORT",
    "kubeIPVSFilterChain": "KUBE-IPVS-FILTER", "kubeIPVSOutFilterChain": "KUBE-IPVS-OUT-FILTER",
    "kubeLoadBalancerChain": "KUBE-LOAD-BALANCER", "kubeMarkMasqChain": "KUBE-MARK-MASQ",
    # ipsets (pkg/proxy/ipvs/ipset.go)
    "kubeLoadBalancerSet": "KUBE-LOAD-BALANCER", "kubeClusterIPSet": "KUBE-CLUSTER-IP",
    "kubeNodePortSetTCP": "KUBE-NODE-PORT-TCP", "kubeNodePortLocalSetTCP": "KUBE-NODE-PORT-LOCAL-TCP",
    "kubeNodePortSetUDP": "KUBE-NODE-PORT-UDP", "kubeHealthCheckNodePortSet": "KUBE-HEALTH-CHECK-NODE-PORT",
}
BUILTIN = {"Input": "INPUT", "Forward": "FORWARD", "Output": "OUTPUT", "Prerouting": "PREROUTING",
           "Postrouting": "POSTROUTING"}


def upstream_jumps(mode: str) -> list[tuple[str, ...]]:
    """The jump tables of the source excerpts, as `iptables` arguments."""
    jumps = []
    if mode == "iptables":
        for table, target, chain, comment, _, extra in GO_JUMP.findall(data("iptables-jump-chains.source.txt")):
            args = tuple(re.findall(r'"([^"]*)"', extra or ""))
            commented = ("-m", "comment", "--comment", comment) if comment else ()
            jumps.append(("-t", table.lower(), "-I", BUILTIN[chain], "1", *args, *commented, "-j", GO_CHAINS[target]))
    else:
        for table, chain, target, comment in GO_IPVS_JUMP.findall(data("ipvs-jump-chains.source.txt")):
            jumps.append(("-t", table.lower(), "-I", BUILTIN[chain], "1", "-m", "comment", "--comment", comment,
                          "-j", GO_CHAINS[target]))
    return jumps


def effective_order(jumps: list[tuple[str, ...]]) -> dict[tuple[str, str], list[str]]:
    """Each built-in chain's jump targets after the prepends, first to last."""
    chains: dict[tuple[str, str], list[str]] = {}
    for jump in jumps:
        targets = chains.setdefault((jump[1], jump[3]), [])
        if jump[-1] not in targets:  # EnsureRule: no-op when present
            targets.insert(0, jump[-1])
    return chains


@pytest.mark.parametrize("mode", ["iptables", "ipvs"])
def test_jumps_are_kube_proxys(mode):
    expected = upstream_jumps(mode)
    assert len(expected) == (14 if mode == "iptables" else 9)
    assert shapes.iptables_jumps(mode, filter_rules=True) == expected
    # the default (fewer jumps) keeps kube-proxy's order in every built-in chain
    full, default = effective_order(expected), effective_order(shapes.iptables_jumps(mode))
    for chain, targets in default.items():
        assert targets == [target for target in full[chain] if target in targets], chain


# --- nftables mode ------------------------------------------------------------------------------

NFT_NAME = re.compile(r"\b(service|external|local|endpoint|firewall|affinity)-[A-Z2-7]{8}-")
NFT_CHAINS = ("nat-prerouting", "nat-output", "services", "nodeport-endpoints-check", "service-endpoints-check",
              "firewall-check", "mark-for-masquerade", "masquerading", "reject-chain")
NFT_MAPS = ("service-ips", "service-nodeports", "no-endpoint-services", "no-endpoint-nodeports", "firewall-ips",
            "nodeport-ips", "cluster-ips")


def nft_text(text: str) -> str:
    text = NFT_NAME.sub(r"\1-", text)
    text = re.sub(r' comment "[^"]*"', "", text)
    text = re.sub(r"\s*,\s*", ", ", text)
    text = re.sub(r"\s+", " ", text).strip()
    # 030880a5 dropped "<proto> dport <port>" from the masquerade rule that 01d7de54 (and the lab) write:
    # the chain is only reached for that ClusterIP and port, so both match the same packets
    return re.sub(r"^(ip daddr \S+) (?:tcp|udp|sctp) dport \d+ (ip saddr != \S+ jump mark-for-masquerade)$",
                  r"\1 \2", text)


def parse_nft_dump(text: str) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """knftables' Dump format: `add chain|rule|element|set|map ip kube-proxy NAME ...`."""
    chains: dict[str, list[str]] = {}
    elements: dict[str, set[str]] = {}
    for line in text.splitlines():
        if match := re.match(r"add rule ip kube-proxy (\S+) (.*)$", line):
            chains.setdefault(nft_text(match.group(1)), []).append(nft_text(match.group(2)))
        elif match := re.match(r"add chain ip kube-proxy (\S+)", line):
            chains.setdefault(nft_text(match.group(1)), [])
        elif match := re.match(r"add element ip kube-proxy (\S+) \{ (.*) \}$", line):
            elements.setdefault(nft_text(match.group(1)), set()).add(nft_text(match.group(2)))
        elif match := re.match(r"add (?:set|map) ip kube-proxy (\S+)", line):
            elements.setdefault(nft_text(match.group(1)), set())
    return chains, elements


def parse_nft_table(text: str) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """The `table ip kube-proxy { ... }` text shapes.py writes for `nft -f`."""
    chains: dict[str, list[str]] = {}
    elements: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if match := re.match(r"(?:set|map) (\S+) \{(.*)\}$", line):
            listed = re.search(r"elements = \{ (.*) \}", match.group(2))
            elements[nft_text(match.group(1))] = {nft_text(item) for item in listed.group(1).split(", ")} \
                if listed else set()
        elif match := re.match(r"chain (\S+) \{(.*)$", line):
            current = nft_text(match.group(1))
            chains[current] = []
            if match.group(2).rstrip().endswith("}"):
                current = None
        elif line == "}":
            current = None
        elif current and not line.startswith("comment "):
            chains[current].append(nft_text(line))
    return chains, elements


def drop_affinity(parsed: tuple[dict, dict]) -> tuple[dict, dict]:
    chains, elements = parsed
    return ({name: [rule for rule in rules if "@affinity-" not in rule] for name, rules in chains.items()},
            {name: items for name, items in elements.items() if not name.startswith("affinity-")})


def nft_differences(expected: tuple[dict, dict], ours: tuple[dict, dict], *, subset: bool = False) -> list[str]:
    """Per compared chain (ordered) and map (as a set); `subset`: only what `expected` lists."""
    (their_chains, their_elements), (our_chains, our_elements) = drop_affinity(expected), drop_affinity(ours)
    found = []
    for name in sorted(their_chains.keys() | ({} if subset else our_chains.keys())):
        if name in NFT_CHAINS or re.match(r"(service|external|local|endpoint|firewall)-", name):
            if their_chains.get(name) != our_chains.get(name):
                found.append(f"chain {name}: upstream {their_chains.get(name)}, ours {our_chains.get(name)}")
    for name in NFT_MAPS:
        if subset and name not in their_elements:
            continue
        theirs, mine = their_elements.get(name, set()), our_elements.get(name, set())
        if subset:
            mine = {item for item in mine if item.split(" :")[0] in {i.split(" :")[0] for i in theirs}}
        if theirs != mine:
            found.append(f"{name}: upstream only {sorted(theirs - mine)}, ours only {sorted(mine - theirs)}")
    return found


def test_nftables_overall_rules_match_kube_proxys_test():
    """TestOverallNFTablesRules (nodePortAddresses = the node IP: `@nodeport-ips`): the service-ips /
    service-nodeports / no-endpoint maps and every nat and per-Service chain. The filter base chains
    are left out: their hooks and priorities changed after v1.31 (-110 then, 0 at 030880a5) and the
    lab keeps the v1.31 layout."""
    services = overall_services()
    ours = shapes.nftables_mode(services, cluster_cidr="10.0.0.0/8", node_port_addresses=("192.168.0.2",),
                                node_ip="192.168.0.2")
    assert nft_differences(parse_nft_dump(data("nftables-TestOverallNFTablesRules.txt")), parse_nft_table(ours)) == []


def test_nftables_local_policies_match_the_source():
    """`local-` chains, the eTP Local `external-` chain with its final goto, iTP Local (the
    ClusterIP to `local-`, `drop` without a local endpoint), and `fib daddr type local` NodePorts
    when nodePortAddresses is unset."""
    ours = parse_nft_table(shapes.nftables_mode(policy_services(), cluster_cidr="10.0.0.0/8"))
    found = nft_differences(parse_nft_dump(data("nftables-syncProxyRules.source.txt")), ours, subset=True)
    # Known: the lab's no-endpoint NodePort check has no `fib daddr type local`. It runs only from the
    # input hook (filter-input), where the destination is a local address anyway.
    assert found == ["chain nodeport-endpoints-check: upstream ['fib daddr type local ip daddr != 127.0.0.0/8 meta "
                     "l4proto . th dport vmap @no-endpoint-nodeports'], ours ['ip daddr != 127.0.0.0/8 meta l4proto . "
                     "th dport vmap @no-endpoint-nodeports']"]


# --- IPVS mode ----------------------------------------------------------------------------------

def expected_ipvs_chains(name: str) -> dict[str, list[tuple[str, str, str | None]]]:
    """An `ExpectedIptablesChain` literal: chain -> [(target, match-set, source or None)]."""
    def resolve(token: str) -> str:
        token = token.strip()
        token = token[len("string("):-1] if token.startswith("string(") else token
        return token.strip('"') if token.startswith('"') else GO_CHAINS[token]
    chains: dict[str, list[tuple[str, str, str | None]]] = {}
    current = ""
    for line in data(name).splitlines():
        if match := re.match(r"\s*string\((\w+)\): \{\{$", line):
            current = GO_CHAINS[match.group(1)]
            chains[current] = []
        elif match := re.search(r"JumpChain: ([^,]+), (MatchSet|SourceAddress): ([^,]+),", line):
            target, field, argument = resolve(match.group(1)), match.group(2), resolve(match.group(3))
            chains[current].append((target, argument if field == "MatchSet" else "",
                                    argument if field == "SourceAddress" else None))
    return chains


def ipvs_rules(text: str, chain: str) -> list[tuple[str, str, str]]:
    """A chain's rules in the nat and then the filter table: (target, match-set, source)."""
    found = []
    for table in ("nat", "filter"):
        for rule in parse_restore(text).get(table, {"rules": {}})["rules"].get(chain, []):
            tokens = shlex.split(rule)
            def after(flag: str) -> str:
                return tokens[tokens.index(flag) + 1] if flag in tokens else ""
            source = after("-s") if "-s" in tokens and tokens[tokens.index("-s") - 1] != "!" else ""
            found.append((after("-j"), after("--match-set"), source))
    return found


IPVS_CASES = {
    "ipvs-TestLoadBalancer.txt": [LabService("ns1", "svc1", "p80", "tcp", "10.20.30.41", 80, 3001,
                                             (Endpoint("10.180.0.1", 80, False),), load_balancer_ips=("1.2.3.4",))],
    "ipvs-TestOnlyLocalNodePorts.txt": [LabService("ns1", "svc1", "p80", "tcp", "10.20.30.41", 80, 3001,
                                                   (Endpoint("10.180.0.1", 80), Endpoint("10.180.1.1", 80, False)),
                                                   external_policy=LOCAL)],
    "ipvs-TestNodePortIPv4-udp.txt": [LabService("ns1", "svc1", "p80", "udp", "10.20.30.41", 80, 3001,
                                                 (Endpoint("10.180.0.1", 80, False),))],
}


@pytest.mark.parametrize("name", sorted(IPVS_CASES))
def test_ipvs_chains_match_kube_proxys_tests(name):
    """KUBE-SERVICES' `-s 127.0.0.0/8 -j RETURN` first, KUBE-LOAD-BALANCER, KUBE-NODE-PORT's
    KUBE-NODE-PORT-LOCAL-* RETURN before the masquerade mark, the health-check ACCEPT: per chain,
    every rule in order (target, ipset, source). The tests' fake proxier has no local-traffic
    detector: clusterCIDR unset."""
    ours = shapes.ipvs_mode(services=IPVS_CASES[name], cluster_cidr=None, localhost_return=True, filter_rules=True)
    for chain, rules in expected_ipvs_chains(name).items():
        mine = ipvs_rules(ours, chain)
        assert [(target, match_set) for target, match_set, _ in mine] == [(t, m) for t, m, _ in rules], chain
        assert [source for (_, _, source), (_, _, wanted) in zip(mine, rules) if wanted is not None] == \
            [wanted for _, _, wanted in rules if wanted is not None], chain


def test_ipvs_localhost_return_comes_first():
    """TestDismissLocalhostRuleExist: with no Service at all."""
    assert 'SourceAddress.Matches(test.src)' in data("ipvs-TestDismissLocalhostRuleExist.txt")
    assert ipvs_rules(shapes.ipvs_mode(services=[], localhost_return=True), "KUBE-SERVICES")[0] == \
        ("RETURN", "", "127.0.0.0/8")
    assert ipvs_rules(shapes.ipvs_mode(localhost_return=True), "KUBE-SERVICES")[0] == ("RETURN", "", "127.0.0.0/8")


def test_ipvs_rules_and_sets_match_the_source():
    """writeIptablesRules for LoadBalancer (eTP Local, source ranges), externalIPs (both
    policies), NodePorts (TCP Local, UDP Cluster): nat and filter, every chain in order, and the
    ipset entries."""
    services = ipvs_services()
    ours = shapes.ipvs_mode(services=services, cluster_cidr="10.0.0.0/8", localhost_return=True, filter_rules=True)
    expected = data("ipvs-writeIptablesRules.source.txt")
    found = differences(expected, ours, {}, unordered=set(), tail=None)
    # Known: KUBE-IPVS-OUT-FILTER's `-m ipvs` rule (no node access to an LB IP its source ranges leave out)
    # needs the IPVS module, which the lab's kernel lacks; the chain exists, empty.
    assert found == ["filter KUBE-IPVS-OUT-FILTER: upstream only ['--vaddr 1.2.3.4 --vport 80 --vproto tcp -j DROP "
                     "-m ipvs -s 1.2.3.4'], ours only []"]
    source = (DATA / "ipvs-writeIptablesRules.source.txt").read_text(encoding="utf-8")
    listed = [line.split()[2:] for line in source.splitlines() if line.startswith("#ipset add ")]
    entries = shapes.ipvs_entries(services, node_addresses=("192.168.0.2",), node_ip="192.168.0.2")
    assert sorted((name, entry) for name, values in entries.items() for entry in values) == sorted(map(tuple, listed))


def test_ipvs_1_10_matches_the_source():
    """The v1.10 proxier: NodePort jump on the bitmap alone (no addrtype match), Local NodePorts
    ACCEPTed in KUBE-NODE-PORT, no ClusterIP ACCEPT."""
    ours = shapes.ipvs_mode(services=ipvs_1_10_services(), cluster_cidr="10.0.0.0/8", version=(1, 10))
    assert differences(data("ipvs-v1.10-syncProxyRules.source.txt"), ours, {}, unordered=set(), tail=None) == []
    nodeport_jumps = [rule for rule in ours.splitlines() if rule.endswith("-j KUBE-NODE-PORT")]
    assert nodeport_jumps and not any("addrtype" in rule for rule in nodeport_jumps)
    with pytest.raises(NotImplementedError):
        shapes.ipvs_mode(services=ipvs_services(), version=(1, 10))


# --- the kernel accepts them ----------------------------------------------------------------------

def test_new_shapes_load_into_a_lab_node(lab_ready):
    """Every opt-in shape, written into a lab node: iptables-restore, ipset and nft accept them and
    iptables-save lists as many rules per chain as were written."""
    def counts(text: str, tables=("nat", "filter")) -> Counter:
        parsed = parse_restore(text)
        return Counter({(table, chain): len(rules) for table in tables if table in parsed
                        for chain, rules in parsed[table]["rules"].items() if chain.startswith("KUBE-")})

    with netlab.Node(prefix="kp22", portmap=False) as node:
        rules = shapes.iptables_mode([*overall_services(), *policy_services()], filter_rules=True,
                                     node_port_addresses=(netlab.NODE_IP, "127.0.0.1"), node_ip=netlab.NODE_IP)
        node.iptables_restore(rules)
        for jump in shapes.iptables_jumps("iptables", filter_rules=True):
            node.iptables(*jump)
        saved = node.node_run("iptables-save").stdout
        assert counts(saved) - counts(rules) == Counter() and counts(rules) - counts(saved) == Counter()
        node.nft(shapes.nftables_mode([*overall_services(), *policy_services()],
                                      node_port_addresses=(netlab.NODE_IP,), node_ip=netlab.NODE_IP))
        assert "nodeport-ips" in node.node_run("nft", "list", "table", "ip", "kube-proxy").stdout

    for services, options, sets in ((ipvs_services(), {"localhost_return": True, "filter_rules": True}, {}),
                                    (ipvs_1_10_services(), {"version": (1, 10)}, {"version": (1, 10)})):
        with netlab.Node(prefix="kp22", portmap=False) as node:
            for command in shapes.ipvs_ipsets(services, all_sets=True, **sets):
                node.node_run("ipset", *command)
            rules = shapes.ipvs_mode(services=services, **options)
            node.iptables_restore(rules)
            for jump in shapes.iptables_jumps("ipvs", filter_rules="filter_rules" in options):
                node.iptables(*jump)
            saved = node.node_run("iptables-save").stdout
            assert counts(saved) == counts(rules), options
