"""The launcher's view of the hosts of a job: how a command reaches a host
(directly on this one, over ssh on the others), the check that every host
answers, and the choice of the network interface the ranks use.

Thread-safety: a `Hosts` object belongs to the launcher's main thread; the
reader threads it starts only append to their own `_Agent`.
"""

import ctypes
import json
import math
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


class LaunchError(Exception):
    """A failure before any rank starts, worded for the user."""


def die_with_parent():
    """Runs in each child before exec: its own process group (so signals
    reach its children too) and SIGKILL if the launcher dies."""
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def is_local(host):
    return host in _LOCAL_NAMES or host in (socket.gethostname(),
                                           socket.getfqdn())


class SshSettings:
    def __init__(self, port=None, identity=None, connect_timeout_s=30.0):
        self.port = port
        self.identity = identity
        self.connect_timeout_s = connect_timeout_s

    def argv(self, host, remote_command):
        """ssh's command line for running `remote_command` (a list) on host.
        BatchMode: a missing key fails instead of prompting; the user's own
        ssh configuration (known hosts, keys) is respected, not overridden."""
        argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o",
                "ConnectTimeout=%d" % max(1, math.ceil(self.connect_timeout_s))]
        if self.port is not None:
            argv += ["-p", str(self.port)]
        if self.identity is not None:
            argv += ["-i", self.identity]
        return argv + [host, " ".join(shlex.quote(a) for a in remote_command)]


def command_on(host, command, ssh):
    """The argv that runs `command` on host: itself on this host, through
    ssh elsewhere."""
    return list(command) if is_local(host) else ssh.argv(host, command)


class _Agent:
    """A helper process on one host speaking JSON lines."""

    def __init__(self, host, argv, preexec_fn):
        self.host = host
        self.lines = []
        self.err = []
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     preexec_fn=preexec_fn)
        self._cv = threading.Condition()
        for stream, sink in ((self.proc.stdout, self.lines),
                             (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, sink),
                             daemon=True).start()

    def _read(self, stream, sink):
        for line in stream:
            with self._cv:
                sink.append(line.decode("utf-8", "replace").rstrip("\r\n"))
                self._cv.notify_all()
        with self._cv:
            sink.append(None)  # end of stream
            self._cv.notify_all()

    def send(self, value):
        try:
            self.proc.stdin.write((json.dumps(value) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def line(self, index, deadline):
        """Line `index` of its output as JSON, or None when the output ended
        or the deadline passed first."""
        with self._cv:
            while len(self.lines) <= index and None not in self.lines:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)
            if len(self.lines) <= index or self.lines[index] is None:
                return None
        try:
            return json.loads(self.lines[index])
        except ValueError:
            return None

    def why(self, timeout_s):
        """Why it did not answer: its last words on stderr, else its exit
        code, else the time it was given."""
        with self._cv:
            err = [l.strip() for l in self.err if l and l.strip()]
        if err:
            return err[-1]
        if self.proc.poll() is not None:
            return "exit code %d" % self.proc.returncode
        return "no answer within %gs" % timeout_s

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _loopback(addr):
    return addr.startswith("127.")


def choose_interface(names, found, reached, forced):
    """The interface the job uses, from each host's interfaces (`found`,
    {name: addr} per host) and what each host reached of the next one
    (`reached`, a set of names per host). Returns (interface, error)."""
    if forced:
        for iface in forced:
            lacking = [names[i] for i, f in enumerate(found) if iface not in f]
            if lacking:
                return None, ("network interface %s is missing on host%s %s"
                              % (iface, "s" if len(lacking) > 1 else "",
                                 ", ".join(lacking)))
        candidates = list(forced)
    else:
        candidates = sorted(set.intersection(*[set(f) for f in found]))
        candidates = [c for c in candidates
                      if not any(_loopback(f[c]) for f in found)]
    usable = [c for c in candidates if all(c in r for r in reached)]
    if usable:
        return usable[0], None
    if not candidates:
        return None, ("the hosts share no network interface name: %s" % "; ".join(
            "%s has %s" % (n, ", ".join(sorted(f)) or "none")
            for n, f in zip(names, found)))
    blocked = ["%s -> %s" % (names[i], names[(i + 1) % len(names)])
               for i, r in enumerate(reached) if not set(candidates) & set(r)]
    return None, ("no network interface of %s reaches every host (%s)"
                  % (", ".join(candidates), ", ".join(blocked) or "partly"))


def find_addresses(names, ssh, secret, forced, timeout_s, preexec_fn=None):
    """Checks every host in parallel and finds each one's address on a
    common interface. Returns ({host: address}, interface, a port that was
    free on the first host); raises LaunchError naming every host that
    fails."""
    probe = [sys.executable, "-m", "horovod.runner.probe"]
    deadline = time.monotonic() + timeout_s
    agents = [_Agent(n, command_on(n, probe, ssh), preexec_fn) for n in names]
    try:
        for a in agents:
            a.send({"secret": secret})
        hello = [a.line(0, deadline) for a in agents]
        failed = ["%s (%s)" % (a.host, a.why(timeout_s))
                  for a, h in zip(agents, hello) if not isinstance(h, dict)]
        if failed:
            raise LaunchError("cannot start on host%s %s"
                              % ("s" if len(failed) > 1 else "",
                                 "; ".join(failed)))
        found = [h.get("ifaces") or {} for h in hello]
        for i, a in enumerate(agents):
            nxt = hello[(i + 1) % len(agents)]
            a.send({"targets": [{"port": nxt["port"], "ifaces": nxt["ifaces"]}]})
        answers = [a.line(1, deadline) for a in agents]
        reached = []
        for a, ans in zip(agents, answers):
            if not isinstance(ans, dict):
                raise LaunchError("host %s did not finish probing the network "
                                  "(%s)" % (a.host, a.why(timeout_s)))
            reached.append(set(ans["reached"][0]))
        iface, error = choose_interface(names, found, reached, forced)
        if error:
            raise LaunchError(error)
        port = hello[0].get("free_port")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise LaunchError("host %s reported no free port" % names[0])
        return {n: f[iface] for n, f in zip(names, found)}, iface, port
    finally:
        for a in agents:
            a.close()
