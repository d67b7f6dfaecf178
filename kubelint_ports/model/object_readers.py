"""One document -> a `Workload` or a `Service`, typing only the fields the rules read: host
ports and hostNetwork listeners, every container's port entries, the ports probes and hooks
connect to, Service ports and addresses. A bad value becomes an `InvalidPort` (`PortReader`),
never the end of the object. `model.build` calls these while loading holds the document's tree.
"""

from __future__ import annotations

import re
from sys import intern

from kubelint_ports.loading import Document
from kubelint_ports.loading.yaml_files import yamltree as yt
from kubelint_ports.workload_kinds import ONE_PER_NODE, WORKLOAD_KINDS
from kubelint_ports.model import placement
from kubelint_ports.model.objects import (
    SIDECAR_HOST_PORT,
    WILDCARD_HOST_IP,
    ContainerPort,
    DeclaredPort,
    HostClaim,
    InvalidPort,
    PortReference,
    Service,
    ServiceAddress,
    ServicePort,
    SilentPort,
    Workload,
)
from kubelint_ports.vocabulary import ObjectRef

SCHEDULING_FIELDS = ("nodeName", "nodeSelector", "affinity", "tolerations")
PROTOCOLS = ("TCP", "UDP", "SCTP")


def object_ref(root: yt.MappingNode, api_version: str, kind: str, namespace: str = "") -> ObjectRef:
    """`namespace`: where the object lands when its metadata names none (a chart's release namespace)."""
    metadata = yt.mapping(yt.get(root, "metadata"), "metadata")
    name = yt.as_str(yt.get(metadata, "name")) or yt.as_str(yt.get(metadata, "generateName"))
    return ObjectRef(api_version, kind, yt.as_str(yt.get(metadata, "namespace")) or namespace, name)


class PortReader:
    """Types port fields; bad values become `InvalidPort` entries instead of stopping the object."""

    def __init__(self) -> None:
        self.invalid: list[InvalidPort] = []

    def port(self, entry: yt.Node, key: str, path: str, *, zero_means_unset: bool = False) -> int | None:
        node = yt.get(entry, key)
        if node is None:
            return None
        field_path = f"{path}.{key}"
        try:
            value = yt.as_int(node)
        except yt.FieldTypeError:
            if isinstance(node, yt.ScalarNode) and yt.parse_int(node.value) is not None:
                message = (f"{key} {node.value!r} is quoted, so the API server reads a string and rejects it; "
                           f"remove the quotes")
            else:
                message = f"{key} must be an integer from 1 to 65535, not {yt.describe(node)}"
            self.invalid.append(InvalidPort(field_path, message))
            return None
        if value == 0 and zero_means_unset:
            return None
        if not 1 <= value <= 65535:
            self.invalid.append(InvalidPort(field_path, f"{key} {value} is not a port number (1-65535)"))
            return None
        return value

    def flag(self, field_path: str, message: str) -> None:
        self.invalid.append(InvalidPort(field_path, message))

    def protocol(self, entry: yt.Node, path: str) -> str:
        protocol = yt.as_str(yt.get(entry, "protocol"), "TCP") or "TCP"
        if protocol not in PROTOCOLS:
            self.flag(f"{path}.protocol", f"protocol {protocol!r} is not one of TCP, UDP, SCTP (the API is "
                                          f"case-sensitive and rejects it)")
        return protocol


def read_workload(document: Document, ref: ObjectRef,
                  shape: tuple[str, str | int | None] | None = None) -> Workload:
    """`shape`: (pod spec path, replicas path or fixed count or ONE_PER_NODE); default: the kind's."""
    root = document.root
    pod_spec_path, replicas_path = shape or WORKLOAD_KINDS[ref.kind]
    pod_spec = yt.mapping(yt.at(root, pod_spec_path), pod_spec_path)
    replicas: int | None = 1
    if replicas_path == ONE_PER_NODE:
        replicas = None
    elif isinstance(replicas_path, int):
        replicas = replicas_path
    elif replicas_path and (node := yt.at(root, replicas_path)) is not None:
        replicas = yt.as_int(node)
    host_network = yt.as_bool(yt.get(pod_spec, "hostNetwork"))
    reader = PortReader()
    claims: list[HostClaim] = []
    declared: list[ContainerPort] = []
    silent: list[SilentPort] = []
    flags: list[SilentPort] = []
    for containers_key in ("containers", "initContainers"):
        containers = yt.items(yt.get(pod_spec, containers_key), containers_key)
        for index, container in enumerate(containers):
            container = yt.mapping(container, f"{containers_key}[{index}]")
            # Ordinary init containers have exited before the pod's ports matter; sidecars have not.
            if containers_key == "initContainers" and yt.as_str(yt.get(container, "restartPolicy")) != "Always":
                continue
            container_path = f"{pod_spec_path}.{containers_key}[{index}]"
            name = yt.as_str(yt.get(container, "name"))
            claims.extend(read_container_ports(container, container_path, name, host_network, reader, declared,
                                               sidecar=containers_key == "initContainers"))
            listening = listening_ports(container, container_path, name)
            flags.extend(port for port in listening if not port.source.startswith("its "))
            if host_network:
                silent.extend(listening)
    template_metadata = pod_spec_path.rpartition(".")[0] + ".metadata" if "." in pod_spec_path else "metadata"
    labels = yt.to_plain(yt.mapping(yt.at(root, template_metadata + ".labels"), "labels")) or {}
    scheduling = placement.scheduling_from_pod_spec(
        {key: yt.to_plain(yt.get(pod_spec, key)) for key in SCHEDULING_FIELDS})
    workload = Workload(document, ref, pod_spec_path, replicas, host_network, tuple(claims),
                        {str(k): str(v) for k, v in labels.items()}, scheduling, tuple(reader.invalid),
                        container_ports=tuple(declared), silent_ports=undeclared(silent, declared),
                        listen_flags=tuple(flags))
    add_port_details(workload, pod_spec)
    hook = yt.get(yt.at(root, "metadata.annotations"), "helm.sh/hook")
    workload.helm_hook = hook is not None and isinstance(hook, yt.ScalarNode) and bool(hook.value.strip())
    return workload


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
# Listener flags name what they open: `--port`, `--healthz-port`, `--web.listen-address`,
# `--metrics-bind-address`, `--statsd.listen-tcp`. Flags about a port the process connects to
# (`--kubelet-port`, `--redis-port`) or a UDP listener are not TCP listeners.
_LISTENER_ENDINGS = frozenset(("port", "address", "addr", "listen"))
_CLIENT_WORDS = frozenset(("kubelet", "redis", "db", "database", "remote", "upstream", "target", "backend",
                           "apiserver", "etcd", "master", "peer", "proxy", "dns", "service", "cluster", "api",
                           "server", "endpoint", "url", "connect", "dial", "udp", "report", "support"))
_LISTEN_VALUE = re.compile(r"(?:\[?([0-9a-fA-F.:]*)\]?:)?([0-9]{1,5})")


def listener_flag(flag: str) -> bool:
    words = [w for w in re.split(r"[-._]", flag.lstrip("-").lower()) if w]
    if words and words[-1] == "tcp":
        words = words[:-1]
    return bool(words) and words[-1] in _LISTENER_ENDINGS and not _CLIENT_WORDS.intersection(words)


def listening_ports(container: yt.Node, container_path: str, name: str) -> list[SilentPort]:
    """Ports a container shows it listens on: listen flags first (they name the listener), then
    probe ports (sources "its livenessProbe", ...). For a hostNetwork pod, ports of the node."""
    found = []
    for key in ("command", "args"):
        node = yt.get(container, key)
        words = node.value if isinstance(node, yt.SequenceNode) else []
        for index, word in enumerate(words):
            if not isinstance(word, yt.ScalarNode) or not word.value.startswith("-"):
                continue
            flag, equals, value = word.value.partition("=")
            value_index = index
            if not equals and index + 1 < len(words) and isinstance(words[index + 1], yt.ScalarNode):
                value, value_index = words[index + 1].value, index + 1  # `--port 8080`
            if listener_flag(flag) and (match := _LISTEN_VALUE.fullmatch(value.strip())):
                port = int(match.group(2))
                address = match.group(1) or ""
                if 1 <= port <= 65535:
                    found.append(SilentPort(port, flag, name, f"{container_path}.{key}[{value_index}]",
                                            "" if address in ("", "0.0.0.0", "::") else address))
    for probe in PROBES:
        for handler in ("httpGet", "tcpSocket", "grpc"):
            node = yt.at(container, f"{probe}.{handler}.port")
            if node is not None and yt.scalar_type(node) == yt.INT:
                port = yt.parse_int(node.value)
                if port and 1 <= port <= 65535:
                    found.append(SilentPort(port, f"its {probe}", name, f"{container_path}.{probe}.{handler}.port"))
    return found


def undeclared(silent: list[SilentPort], declared: list[ContainerPort]) -> tuple[SilentPort, ...]:
    """Only the ports the scheduler does not see: declared ones are host ports already."""
    seen = {p.container_port for p in declared if p.protocol == "TCP"}
    unique: dict[int, SilentPort] = {}
    for port in silent:
        if port.port not in seen:
            unique.setdefault(port.port, port)
    return tuple(unique.values())


def read_container_ports(container: yt.Node, container_path: str, name: str, host_network: bool,
                         reader: PortReader, declared: list[ContainerPort], sidecar: bool = False) -> list[HostClaim]:
    claims = []
    for index, entry in enumerate(yt.items(yt.get(container, "ports"), f"{container_path}.ports")):
        entry = yt.mapping(entry, "a container port")
        path = intern(f"{container_path}.ports[{index}]")  # the same few paths in every workload
        container_port = reader.port(entry, "containerPort", path)
        host_port = reader.port(entry, "hostPort", path, zero_means_unset=True)
        protocol = reader.protocol(entry, path)
        port_name = yt.as_str(yt.get(entry, "name"))
        host_ip = yt.as_str(yt.get(entry, "hostIP"), WILDCARD_HOST_IP) or WILDCARD_HOST_IP
        declared.append(ContainerPort(name, path, port_name, container_port,
                                      container_port if host_network else host_port, protocol, host_ip))
        if yt.get(entry, "containerPort") is None:
            what = f"hostPort {host_port} has no containerPort" if host_port else "a container port needs a containerPort"
            reader.flag(f"{path}.hostPort" if host_port else path,
                        f"{what}: the API server rejects the pod; add the port the container listens on")
        if host_network:
            # The API defaults hostPort = containerPort on hostNetwork Pods, not on templates.
            if host_port and container_port and host_port != container_port:
                reader.flag(f"{path}.hostPort", f"hostPort {host_port} must equal containerPort "
                                                f"{container_port} when hostNetwork is true")
            if container_port:
                # An explicit hostPort is the number as the node sees it: point there when written.
                key = "hostPort" if host_port == container_port else "containerPort"
                claims.append(HostClaim(container_port, protocol, host_ip, "hostNetwork", name,
                                        f"{path}.{key}", container_port, port_name))
        elif host_port:
            claims.append(HostClaim(host_port, protocol, host_ip, SIDECAR_HOST_PORT if sidecar else "hostPort",
                                    name, f"{path}.hostPort",
                                    container_port, port_name))
    return claims


def read_service(document: Document, ref: ObjectRef) -> Service:
    spec = yt.mapping(yt.get(document.root, "spec"), "spec")
    service_type = yt.as_str(yt.get(spec, "type"), "ClusterIP") or "ClusterIP"
    reader = PortReader()
    ports = []
    takes_node_ports = service_type in ("NodePort", "LoadBalancer")
    for index, entry in enumerate(yt.items(yt.get(spec, "ports"), "spec.ports")):
        entry = yt.mapping(entry, "a Service port")
        path = intern(f"spec.ports[{index}]")
        port = reader.port(entry, "port", path)
        if port is None and yt.get(entry, "port") is None:
            reader.flag(path, "a Service port needs a port number (the API server rejects the Service)")
        node_port = reader.port(entry, "nodePort", path, zero_means_unset=True)
        if node_port and not takes_node_ports:
            reader.flag(f"{path}.nodePort", f"nodePort {node_port} is set on a Service of type {service_type}; "
                                            "the API server rejects it (only NodePort and LoadBalancer take one)")
            node_port = None
        ports.append(ServicePort(path, yt.as_str(yt.get(entry, "name")), reader.protocol(entry, path), port,
                                 read_target_port(entry, path, reader), node_port))
    health_check = reader.port(spec, "healthCheckNodePort", "spec", zero_means_unset=True)
    local_traffic = yt.as_str(yt.get(spec, "externalTrafficPolicy")) == "Local"
    if health_check and not (service_type == "LoadBalancer" and local_traffic):
        reader.flag("spec.healthCheckNodePort", f"healthCheckNodePort {health_check} is only allowed on a "
                                                "LoadBalancer Service with `externalTrafficPolicy: Local`; the API "
                                                "server rejects it here")
        health_check = None
    selector = yt.to_plain(yt.mapping(yt.get(spec, "selector"), "spec.selector")) or {}
    external_ips = tuple(yt.as_str(ip) for ip in yt.items(yt.get(spec, "externalIPs"), "spec.externalIPs"))
    ingress = yt.at(document.root, "status.loadBalancer.ingress")
    lb_ips = tuple(yt.as_str(yt.get(item, "ip")) for item in yt.items(ingress, "status.loadBalancer.ingress")
                   if yt.get(item, "ip") is not None)
    service = Service(
        document, ref, service_type, tuple(ports),
        cluster_ip=yt.as_str(yt.get(spec, "clusterIP")),
        selector={str(k): str(v) for k, v in selector.items()},
        health_check_node_port=health_check,
        allocate_load_balancer_node_ports=yt.as_bool(yt.get(spec, "allocateLoadBalancerNodePorts"), True),
        external_ips=external_ips,
        load_balancer_ips=lb_ips,
        invalid_ports=tuple(reader.invalid),
        labels=yt.to_plain(yt.get(yt.get(document.root, "metadata"), "labels")) or {},
        # The API accepts externalTrafficPolicy only where there is external traffic (NodePort,
        # LoadBalancer, externalIPs); kube-proxy applies it to nodePorts, external and LB IPs alike.
        external_local=local_traffic,
        internal_local=yt.as_str(yt.get(spec, "internalTrafficPolicy")) == "Local",
    )
    service.addresses = service_addresses(document.root, spec)
    return service


def read_target_port(entry: yt.Node, path: str, reader: PortReader) -> int | str | None:
    node = yt.get(entry, "targetPort")
    if node is None:
        return None
    if isinstance(node, yt.ScalarNode) and yt.scalar_type(node) == yt.STR:
        name = node.value  # a named port (IntOrString): an IANA service name, with at least one letter
        if name.isdigit():
            # A badly formed name is invalid-port-name's (it reads the name kept here).
            reader.flag(f"{path}.targetPort", f"targetPort {name!r} is neither a port number nor a valid port "
                                              f"name (lowercase letters, digits and '-', at most 15); a number "
                                              f"must not be quoted")
            return None
        return name
    return reader.port(entry, "targetPort", path)


# --- what the API-validation and Service-routing rules read ---------------------------------------

LIFECYCLE_HOOKS = ("lifecycle.postStart", "lifecycle.preStop")
PORT_HANDLERS = ("httpGet", "tcpSocket", "grpc")  # grpc takes a number only; hooks have no grpc


def add_port_details(workload: Workload, pod_spec: yt.MappingNode | None) -> None:
    """Every container's port entries as written, plain init containers included, and the ports
    probes and lifecycle hooks connect to. Plain init containers get the port checks the claims
    reader above skips (it reads only what holds a port while the pod runs)."""
    reader = PortReader()
    declared: list[DeclaredPort] = []
    references: list[PortReference] = []
    for containers_key in ("containers", "initContainers"):
        for index, container in enumerate(yt.items(yt.get(pod_spec, containers_key), containers_key)):
            container = yt.mapping(container, f"{containers_key}[{index}]")
            path = f"{workload.pod_spec_path}.{containers_key}[{index}]"
            name = yt.as_str(yt.get(container, "name"))
            role = "container"
            if containers_key == "initContainers":
                role = "sidecar" if yt.as_str(yt.get(container, "restartPolicy")) == "Always" else "init"
            if role == "init":
                read_container_ports(container, path, name, False, reader, [])
            declared.extend(declared_ports(container, path, name, role))
            if role != "init":  # the API server rejects probes and hooks on plain init containers
                references.extend(port_references(container, path, name, reader))
    workload.declared_ports = tuple(declared)
    workload.port_references = tuple(references)
    workload.invalid_ports += tuple(reader.invalid)


def quiet_int(node: yt.Node | None) -> int | None:
    """An integer field already judged elsewhere: its value, or None when it has none."""
    if node is None:
        return None
    try:
        return yt.as_int(node)
    except yt.FieldTypeError:
        return None


def declared_ports(container: yt.MappingNode, container_path: str, name: str, role: str) -> list[DeclaredPort]:
    found = []
    for index, entry in enumerate(yt.items(yt.get(container, "ports"), f"{container_path}.ports")):
        entry = yt.mapping(entry, "a container port")
        host_port = quiet_int(yt.get(entry, "hostPort"))
        found.append(DeclaredPort(
            name, role, intern(f"{container_path}.ports[{index}]"), yt.as_str(yt.get(entry, "name")),
            quiet_int(yt.get(entry, "containerPort")), host_port or None,
            yt.as_str(yt.get(entry, "protocol"), "TCP") or "TCP", yt.as_str(yt.get(entry, "hostIP"))))
    return found


def port_references(container: yt.MappingNode, container_path: str, name: str,
                    reader: PortReader) -> list[PortReference]:
    found = []
    lifecycle = yt.get(container, "lifecycle")
    for source in (*PROBES, *LIFECYCLE_HOOKS):
        hook = source in LIFECYCLE_HOOKS
        holder = yt.get(lifecycle, source.partition(".")[2]) if hook else yt.get(container, source)
        if holder is None:
            continue
        for handler in PORT_HANDLERS[:2] if hook else PORT_HANDLERS:
            action = yt.mapping(yt.get(holder, handler), f"{source}.{handler}")
            if action is None:
                continue
            value = reference_value(action, f"{container_path}.{source}.{handler}", f"{source}.{handler}",
                                    handler != "grpc", reader)
            if value is not None:
                found.append(PortReference(name, source, intern(f"{container_path}.{source}.{handler}.port"), value))
    return found


def reference_value(action: yt.MappingNode, path: str, label: str, names_allowed: bool,
                    reader: PortReader) -> int | str | None:
    """A probe's or hook's port (IntOrString; grpc an integer), or None after flagging it."""
    node = yt.get(action, "port")
    if node is None:
        reader.flag(path, f"{label} has no port: the API server rejects the pod; add the port number"
                          + (" or name" if names_allowed else ""))
        return None
    kind = yt.scalar_type(node) if isinstance(node, yt.ScalarNode) else ""
    if kind == yt.INT:
        value = yt.parse_int(node.value)
        if value is not None and 1 <= value <= 65535:
            return value
        reader.flag(f"{path}.port", f"{label}.port {node.value} is not a port number (1-65535)")
        return None
    if kind == yt.STR and not node.value.isdigit() and names_allowed:
        return intern(node.value)  # a port name; invalid-port-name judges its form
    if kind == yt.STR and node.value.isdigit():
        what = "a port name, which needs a letter," if names_allowed else "a string"
        reader.flag(f"{path}.port", f"{label}.port {node.value!r} is quoted, so the API server reads "
                                    f"{what} and rejects it; remove the quotes")
        return None
    expected = "a port number or a port name" if names_allowed else "a port number"
    reader.flag(f"{path}.port", f"{label}.port must be {expected}, not {yt.describe(node)}")
    return None


def service_addresses(root: yt.MappingNode, spec: yt.MappingNode | None) -> tuple[ServiceAddress, ...]:
    """externalIPs, spec.loadBalancerIP and status ingress IPs, each with where it is written."""
    found = [ServiceAddress(yt.as_str(ip), f"spec.externalIPs[{index}]", "externalIP")
             for index, ip in enumerate(yt.items(yt.get(spec, "externalIPs"), "spec.externalIPs"))]
    if (requested := yt.get(spec, "loadBalancerIP")) is not None:
        found.append(ServiceAddress(yt.as_str(requested), "spec.loadBalancerIP", "loadBalancerIP"))
    ingress = yt.items(yt.at(root, "status.loadBalancer.ingress"), "status.loadBalancer.ingress")
    found += [ServiceAddress(yt.as_str(yt.get(item, "ip")), f"status.loadBalancer.ingress[{index}].ip",
                             "load-balancer ingress IP")
              for index, item in enumerate(ingress) if yt.get(item, "ip") is not None]
    return tuple(address for address in found if address.ip)
