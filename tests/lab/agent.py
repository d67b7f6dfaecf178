"""The lab's two small programs, run inside network namespaces with `ip netns exec`.

    python3 agent.py serve NAME tcp:ADDRESS:PORT udp:ADDRESS:PORT ...
        Listens on every socket given and answers each TCP connection and each UDP datagram with
        `NAME <client address>`: who answered, and the source address it saw. Prints `ready` once
        every socket is bound, then serves until killed.

    python3 agent.py probe TIMEOUT < probes.json
        Reads a JSON list of [protocol, address, port] (or [protocol, address, port, source port]:
        one UDP flow, the same 5-tuple each time) and prints a JSON list of answers in the same
        order: the server's `NAME <address>` line, or `refused`, `timeout` or `error: ...`.

Standard library only: it runs under whatever python3 the node has.
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import sys


def serve(name: str, specs: list[str]) -> None:
    selector = selectors.DefaultSelector()
    for spec in specs:
        protocol, address, port_text = spec.split(":")  # IPv4 only: the lab is single-stack
        port = int(port_text)
        kind = socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM
        sock = socket.socket(socket.AF_INET, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if address not in ("", "0.0.0.0"):
            # Addresses of a down stand-in interface (kube-ipvs0) are local but not "up": allow the bind.
            sock.setsockopt(socket.SOL_IP, getattr(socket, "IP_FREEBIND", 15), 1)
        sock.bind((address, port))
        if kind == socket.SOCK_STREAM:
            sock.listen(64)
        else:
            sock.setsockopt(socket.SOL_IP, IP_PKTINFO, 1)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, protocol)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            sock = key.fileobj
            try:
                if key.data == "tcp":
                    connection, peer = sock.accept()
                    with connection:
                        connection.settimeout(2)
                        connection.sendall(f"{name} {peer[0]}\n".encode())
                else:
                    reply_udp(sock, name)
            except OSError:
                continue


IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)


def reply_udp(sock: socket.socket, name: str) -> None:
    """Answer from the address the datagram was sent to: a socket bound to 0.0.0.0 would
    otherwise answer from the address routing picks, and the client's connected socket would
    drop that reply (which would look like a timeout, not like the packet's real fate)."""
    _, ancillary, _, peer = sock.recvmsg(2048, socket.CMSG_SPACE(12))
    replies = []
    for level, kind, data in ancillary:
        if level == socket.SOL_IP and kind == IP_PKTINFO:
            _, _, destination = struct.unpack("i4s4s", data[:12])
            replies.append((socket.SOL_IP, IP_PKTINFO, struct.pack("i4s4s", 0, destination, bytes(4))))
    sock.sendmsg([f"{name} {peer[0]}\n".encode()], replies, 0, peer)


def probe_one(protocol: str, address: str, port: int, timeout: float, source_port: int = 0) -> str:
    kind = socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.settimeout(timeout)
        if source_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", source_port))
        try:
            sock.connect((address, port))
            if kind == socket.SOCK_DGRAM:
                sock.send(b"who?\n")
                data = sock.recv(2048)
            else:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(2048)
                    if not chunk:
                        break
                    data += chunk
            return data.decode().strip() or "closed"
        except ConnectionRefusedError:
            return "refused"
        except (socket.timeout, TimeoutError):
            return "timeout"
        except OSError as error:
            return f"error: {error.strerror or error}"


def probe(timeout: float) -> None:
    probes = json.load(sys.stdin)
    print(json.dumps([probe_one(probe[0], probe[1], int(probe[2]), timeout, *map(int, probe[3:]))
                      for probe in probes]))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "probe":
        probe(float(sys.argv[2]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
