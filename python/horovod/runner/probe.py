"""Finds the network interfaces on which every host of a job reaches the
others, before any rank starts.

horovodrun starts ``python -m horovod.runner.probe`` on every host (over ssh
for remote ones) and talks to it in JSON lines on its standard input and
output; nothing is ever unpickled or evaluated:

1. launcher -> probe: ``{"secret": HEX}``, the job's secret.
2. probe -> launcher: ``{"port": P, "ifaces": {NAME: IPV4, ...},
   "free_port": F}``, F a port that was free on that host a moment ago. The
   probe listens on P on every address; each connection must prove it
   knows the secret before the probe answers, and the probe proves it in
   return (horovod.runner.auth), so a probe never counts some other
   service as a reachable peer.
3. launcher -> probe: ``{"targets": [{"port": P, "ifaces": {...}}, ...]}``.
4. probe -> launcher: ``{"reached": [[NAME, ...], ...]}``, per target the
   interfaces whose address answered.
5. The probe serves the other hosts' probes until its input ends.
"""

import fcntl
import json
import socket
import struct
import sys
import threading

from horovod.runner import auth
from horovod.runner.remote import read_header

_SIOCGIFADDR = 0x8915


def interfaces():
    """{name: IPv4 address} of this host's interfaces that have one."""
    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                res = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)
            except OSError:
                continue  # no IPv4 address on this interface
            out[name] = socket.inet_ntoa(res[20:24])
    return out


def address_toward(target):
    """This host's address on the route to `target` (an IPv4 address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((target, 9))  # UDP: no packet is sent
        return s.getsockname()[0]


def nic_address(nics):
    """The address of the first of the interfaces `nics` this host has;
    ValueError naming the host and what it has when it has none."""
    found = interfaces()
    for name in nics:
        if name in found:
            return found[name]
    raise ValueError("host %s has none of the interfaces %s (it has %s)"
                     % (socket.gethostname(), ", ".join(sorted(nics)),
                        ", ".join(sorted(found))))


def _serve_one(conn, secret):
    with conn:
        try:
            conn.settimeout(2.0)
            auth.serve_handshake(conn, secret)
        except (OSError, ConnectionError):
            pass


def _serve(listener, secret):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve_one, args=(conn, secret),
                         daemon=True).start()


def reaches(addr, port, secret, timeout=2.0):
    """Whether the probe of this job answers at addr:port."""
    try:
        with socket.create_connection((addr, port), timeout=timeout) as s:
            s.settimeout(timeout)
            auth.client_handshake(s, secret)
            return True
    except (OSError, ConnectionError):
        return False


def _targets(message):
    targets = message.get("targets")
    if not isinstance(targets, list):
        raise ValueError("targets must be a list")
    out = []
    for t in targets:
        port, ifaces = t.get("port"), t.get("ifaces")
        if (not isinstance(port, int) or not 0 < port < 65536 or
                not isinstance(ifaces, dict) or
                not all(isinstance(k, str) and isinstance(v, str)
                        for k, v in ifaces.items())):
            raise ValueError("malformed target")
        out.append((port, ifaces))
    return out


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _emit(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def main():
    stdin = sys.stdin.buffer
    try:
        secret = bytes.fromhex(read_header(stdin, 4096)["secret"])
    except (ValueError, KeyError, TypeError) as e:
        sys.stderr.write("horovodrun (probe): bad header: %s\n" % e)
        return 2
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("0.0.0.0", 0))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, secret), daemon=True).start()
    _emit({"port": listener.getsockname()[1], "ifaces": interfaces(),
           "free_port": _free_port()})
    try:
        targets = _targets(read_header(stdin, 1 << 20))
    except ValueError as e:
        sys.stderr.write("horovodrun (probe): bad targets: %s\n" % e)
        return 2
    reached = []
    for port, ifaces in targets:
        reached.append(sorted(name for name, addr in ifaces.items()
                              if reaches(addr, port, secret)))
    _emit({"reached": reached})
    while stdin.read(4096):  # serve the others until the launcher is done
        pass
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
