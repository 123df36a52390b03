#!/usr/bin/env python3
"""Test hosts on one machine: each a network namespace on a private bridge,
with its own hostname (UTS namespace), its own /dev/shm and /etc/hosts
(mount namespace) and its own sshd, so a job spread over them crosses a
real network the way it would between machines.

    testhosts.py up N      create hosts h1..hN (tearing down old ones first)
    testhosts.py down      remove every test host, also after a crash
    testhosts.py exec H -- CMD...   run CMD inside host H (its network,
                                    hostname and mounts)
    testhosts.py status    print one line per host that is up

Host hN is named `hvd-hN`, has `eth0` at 10.231.7.(10+N)/24 and an sshd on
port 22 of that address (`stop_sshd`/`start_sshd` turn it off and on). Inside every host `ssh hvd-hM` works without a
password or a prompt: each host's /root/.ssh is a generated folder with the
key, a client config and authorized_keys. The machine itself sits on the
bridge at 10.231.7.1 and reaches the hosts with `ssh -F STATE/ssh_config`.
Nothing is routed off the bridge; teardown kills every process in the
hosts' namespaces, so nothing a test started survives it.

Run as root. State lives in $HVD_TESTHOSTS_DIR (default
/tmp/hvd-testhosts); the folder is reused across runs, so the keys persist.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

PREFIX = "hvdt"
BRIDGE = PREFIX + "-br0"
SUBNET = "10.231.7"
MACHINE_ADDR = SUBNET + ".1"
STATE = os.environ.get("HVD_TESTHOSTS_DIR", "/tmp/hvd-testhosts")


def host_name(i):
    return "hvd-h%d" % i


def host_addr(i):
    return "%s.%d" % (SUBNET, 10 + i)


def netns(i):
    return "%s-h%d" % (PREFIX, i)


def _run(*cmd, check=True, quiet=False):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), out.returncode,
                                                   out.stderr.strip()))
    return out


def _namespaces():
    out = _run("ip", "-j", "netns", "list", check=False)
    try:
        return [n["name"] for n in json.loads(out.stdout or "[]")
                if n["name"].startswith(PREFIX + "-")]
    except ValueError:
        return []


def down():
    """Idempotent: whatever a previous run (or a crash) left is removed."""
    for ns in _namespaces():
        for attempt in range(50):
            pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.05)
        _run("ip", "netns", "delete", ns, check=False)
    _run("ip", "link", "delete", BRIDGE, check=False)
    for name in os.listdir(STATE) if os.path.isdir(STATE) else []:
        if name.endswith(".pid"):
            os.unlink(os.path.join(STATE, name))


def _keys():
    """The client key and the hosts' key, made once per state folder."""
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    for name in ("id_ed25519", "host_ed25519"):
        path = os.path.join(STATE, name)
        if not os.path.exists(path):
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                 "hvd-testhosts", "-f", path)


def _write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _client_config(n, identity, known_hosts):
    lines = []
    for i in range(1, n + 1):
        lines += ["Host %s %s" % (host_name(i), host_addr(i)),
                  "  HostName %s" % host_addr(i)]
    lines += ["Host *", "  User root", "  IdentityFile %s" % identity,
              "  IdentitiesOnly yes", "  StrictHostKeyChecking yes",
              "  UserKnownHostsFile %s" % known_hosts, "  BatchMode yes",
              "  LogLevel ERROR", "  ConnectTimeout 5"]
    return "\n".join(lines) + "\n"


def _prepare(n):
    _keys()
    pub = open(os.path.join(STATE, "host_ed25519.pub")).read().split()
    known = "".join("%s,%s %s %s\n" % (host_name(i), host_addr(i), pub[0], pub[1])
                    for i in range(1, n + 1))
    _write(os.path.join(STATE, "known_hosts"), known, 0o644)
    # The folder each host mounts as /root/.ssh: a cluster with passwordless
    # ssh set up, as a Horovod user's would be.
    dot = os.path.join(STATE, "dot_ssh")
    os.makedirs(dot, mode=0o700, exist_ok=True)
    shutil.copy(os.path.join(STATE, "id_ed25519"), os.path.join(dot, "id_ed25519"))
    os.chmod(os.path.join(dot, "id_ed25519"), 0o600)
    _write(os.path.join(dot, "authorized_keys"),
           open(os.path.join(STATE, "id_ed25519.pub")).read())
    _write(os.path.join(dot, "known_hosts"), known, 0o644)
    _write(os.path.join(dot, "config"),
           _client_config(n, "/root/.ssh/id_ed25519", "/root/.ssh/known_hosts"))
    # For the machine itself (outside the hosts).
    _write(os.path.join(STATE, "ssh_config"),
           _client_config(n, os.path.join(STATE, "id_ed25519"),
                          os.path.join(STATE, "known_hosts")))
    hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    hosts += ["%s %s" % (host_addr(i), host_name(i)) for i in range(1, n + 1)]
    hosts.append("%s hvd-machine" % MACHINE_ADDR)
    _write(os.path.join(STATE, "hosts"), "\n".join(hosts) + "\n", 0o644)
    os.makedirs("/run/sshd", exist_ok=True)
    os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)  # the mount point
    for i in range(1, n + 1):
        _write(os.path.join(STATE, "sshd_h%d.conf" % i), "\n".join([
            "ListenAddress %s" % host_addr(i), "Port 22",
            "HostKey %s" % os.path.join(STATE, "host_ed25519"),
            "PidFile %s" % os.path.join(STATE, "sshd_h%d.pid" % i),
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no", "PrintMotd no", "X11Forwarding no",
            "AuthorizedKeysFile /root/.ssh/authorized_keys",
            "MaxStartups 64:30:128", "MaxSessions 64",
            "Subsystem sftp internal-sftp", ""]))


# Runs inside the new UTS and mount namespaces, starts the host's sshd and
# then holds the namespaces (sshd can stop and start again inside them).
_HOST_INIT = """
set -e
hostname "$1"
mount --make-rprivate /
mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm
mount --bind "$2/hosts" /etc/hosts
mount --bind "$2/dot_ssh" /root/.ssh
/usr/sbin/sshd -E "$2/sshd_h$3.log" -f "$2/sshd_h$3.conf"
exec sleep infinity
"""


def sshd_argv(i):
    return ["/usr/sbin/sshd", "-E", os.path.join(STATE, "sshd_h%d.log" % i),
            "-f", os.path.join(STATE, "sshd_h%d.conf" % i)]


def stop_sshd(i):
    """The host stays up (its network answers) but refuses ssh."""
    with open(os.path.join(STATE, "sshd_h%d.pid" % i)) as f:
        pid = int(f.read())
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not os.path.exists("/proc/%d" % pid):
            return
        time.sleep(0.05)


def start_sshd(i):
    _run(*exec_argv(i, sshd_argv(i)))
    _wait_for_ssh(i, time.monotonic() + 20)


def ssh_argv(i, command):
    """Runs a shell command on host i from the machine (outside the hosts)."""
    return ["ssh", "-F", os.path.join(STATE, "ssh_config"), host_name(i), command]


def _wait_for_ssh(i, deadline):
    while True:
        out = _run(*ssh_argv(i, "hostname"), check=False)
        if out.returncode == 0 and out.stdout.strip() == host_name(i):
            return
        if time.monotonic() > deadline:
            log = open(os.path.join(STATE, "init_h%d.log" % i)).read()
            raise RuntimeError("host %s did not come up: %s %s" % (
                host_name(i), out.stderr.strip(), log[-2000:]))
        time.sleep(0.1)


def up(n):
    if os.geteuid() != 0:
        raise RuntimeError("test hosts need root (network namespaces)")
    down()
    _prepare(n)
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", MACHINE_ADDR + "/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    for i in range(1, n + 1):
        ns = netns(i)
        outer = "%s-v%d" % (PREFIX, i)
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0",
             "netns", ns)
        _run("ip", "link", "set", outer, "master", BRIDGE)
        _run("ip", "link", "set", outer, "up")
        _run("ip", "-n", ns, "addr", "add", host_addr(i) + "/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        log = open(os.path.join(STATE, "init_h%d.log" % i), "w")
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--uts", "--mount", "--",
             "/bin/sh", "-c", _HOST_INIT, "init", host_name(i), STATE, str(i)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)
        _write(os.path.join(STATE, "h%d.pid" % i), str(p.pid), 0o644)
    deadline = time.monotonic() + 20
    for i in range(1, n + 1):
        _wait_for_ssh(i, deadline)


def host_pid(i):
    """The process holding the host's namespaces (`ip netns exec` execs
    unshare, which execs sh, which execs sleep: one pid)."""
    with open(os.path.join(STATE, "h%d.pid" % i)) as f:
        return int(f.read())


def host_pids(i):
    """Every process on host i (in its network namespace), as ints."""
    out = _run("ip", "netns", "pids", netns(i), check=False).stdout.split()
    return [int(p) for p in out]


def kill_matching(hosts, text, timeout_s=20.0):
    """SIGKILLs every process on the given hosts whose command line holds
    `text` (a service a test started there: there is no PID namespace, so
    the service's own stop command would reach its other instances on the
    machine) and waits until they are gone."""
    def matching():
        found = []
        for i in hosts:
            for pid in host_pids(i):
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        if text.encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
        return found

    deadline = time.monotonic() + timeout_s
    while True:
        left = matching()
        if not left:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("processes matching %r outlived SIGKILL: %s"
                               % (text, left))
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)


def exec_argv(i, argv, cwd=None):
    """The command line that runs argv inside host i, in folder cwd (default:
    the current one; the hosts share the machine's files)."""
    return ["nsenter", "--target", str(host_pid(i)), "--net", "--uts",
            "--mount", "--wd=" + (cwd or os.getcwd()), "--"] + list(argv)


def status():
    for ns in sorted(_namespaces()):
        print(ns)


def main(argv):
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    cmd = argv[0]
    if cmd == "up":
        up(int(argv[1]) if len(argv) > 1 else 2)
    elif cmd == "down":
        down()
    elif cmd == "status":
        status()
    elif cmd == "exec":
        name = argv[1]
        i = int(name.rsplit("h", 1)[1])
        rest = argv[3:] if len(argv) > 2 and argv[2] == "--" else argv[2:]
        os.execvp("nsenter", exec_argv(i, rest))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
