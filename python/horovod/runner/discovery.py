"""Which hosts an elastic job may use: what discovery reports (a fixed list
from -H, or a script polled for ``host:slots`` lines) minus the hosts
blacklisted after their workers failed, each re-admitted once its cooldown
has passed.

Thread-safety: a `HostManager` and a discovery object belong to the
elastic driver's main thread.
"""

import re
import subprocess
import time

# A host name travels to ssh as one argument: one that starts with '-'
# would be taken for an option.
_HOST = re.compile(r"^[A-Za-z0-9_.\[\]:%-]+$")
MAX_SLOTS = 4096
MAX_OUTPUT_BYTES = 1 << 20


class DiscoveryError(Exception):
    """Discovery failed; worded for the user."""


def parse_hosts(text, slots_per_host, source):
    """{host: slots}, in the order given, from lines of ``host:slots`` or
    ``host`` (then `slots_per_host` slots). Raises DiscoveryError naming the
    line that is neither."""
    hosts = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, slots = line.rpartition(":")
        if not sep or not slots.isdigit():
            name, slots = line, None
        if not _HOST.match(name) or name.startswith("-"):
            raise DiscoveryError("%s, line %d: %r is not a host name"
                                 % (source, number, name))
        if slots is None:
            if slots_per_host is None:
                raise DiscoveryError(
                    "%s, line %d: %r gives no slots: print host:slots or run "
                    "with --slots-per-host" % (source, number, line))
            n = slots_per_host
        else:
            n = int(slots)
        if not 0 < n <= MAX_SLOTS:
            raise DiscoveryError("%s, line %d: %d slots is not between 1 and %d"
                                 % (source, number, n, MAX_SLOTS))
        hosts[name] = n
    return hosts


class FixedHosts:
    """The hosts of -H or -hostfile: they never change."""

    may_add = False

    def __init__(self, hosts):
        self._hosts = dict(hosts)

    def find(self):
        return dict(self._hosts)


class ScriptDiscovery:
    """Runs the user's discovery script (no shell, no arguments) and parses
    its standard output. A script that fails, hangs past `timeout_s` or
    prints garbage raises DiscoveryError."""

    may_add = True

    def __init__(self, script, slots_per_host, timeout_s=10.0):
        self.script = script
        self._slots_per_host = slots_per_host
        self._timeout_s = timeout_s

    def find(self):
        try:
            out = subprocess.run([self.script], capture_output=True,
                                 timeout=self._timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise DiscoveryError("host discovery script %s did not finish "
                                 "within %gs" % (self.script, self._timeout_s))
        except OSError as e:
            raise DiscoveryError("cannot run host discovery script %s: %s"
                                 % (self.script, e.strerror or e))
        if out.returncode != 0:
            err = out.stderr.decode("utf-8", "replace").strip().splitlines()
            raise DiscoveryError("host discovery script %s exited with code %d%s"
                                 % (self.script, out.returncode,
                                    ": " + err[-1] if err else ""))
        if len(out.stdout) > MAX_OUTPUT_BYTES:
            raise DiscoveryError("host discovery script %s printed more than "
                                 "%d bytes" % (self.script, MAX_OUTPUT_BYTES))
        return parse_hosts(out.stdout.decode("utf-8", "replace"),
                           self._slots_per_host,
                           "host discovery script %s" % self.script)


def slot_ids(slots):
    """A host's slots as discovery reports them: a count n (slots 0..n-1),
    or the ids of the slots it has (a cluster manager's task slots, which
    come and go one by one, leaving holes)."""
    if isinstance(slots, int):
        return tuple(range(slots))
    return tuple(sorted(slots))


class HostManager:
    """The hosts a job may place workers on. `update(found)` takes what
    discovery reported ({host: slots}, as `slot_ids` reads them);
    `blacklist(host)` takes a host out after a failure:
    for good without a cooldown range, else for `low * 2**(failures-1)`
    seconds, at most `high`. `usable()` lists the usable hosts in the order
    they were first seen, so a host that was there first stays first.
    `clock` is injectable for tests."""

    def __init__(self, cooldown_range=None, clock=time.monotonic):
        self._cooldown = cooldown_range
        self._clock = clock
        self._order = {}    # host -> the index at which it was first seen
        self._found = {}    # host -> slot ids, as last reported
        self._failures = {}  # host -> failures so far
        self._until = {}    # host -> when its cooldown ends (inf: never)

    def update(self, found):
        """Returns (hosts that appeared, hosts that disappeared)."""
        added = [h for h in found if h not in self._found]
        removed = [h for h in self._found if h not in found]
        for h in found:
            self._order.setdefault(h, len(self._order))
        self._found = {h: slot_ids(n) for h, n in found.items()}
        return added, removed

    def blacklist(self, host):
        """Returns the cooldown in seconds, or None for good."""
        n = self._failures.get(host, 0) + 1
        self._failures[host] = n
        if self._cooldown is None:
            self._until[host] = float("inf")
            return None
        low, high = self._cooldown
        seconds = min(float(high), float(low) * 2 ** (n - 1))
        self._until[host] = self._clock() + seconds
        return seconds

    def is_blacklisted(self, host):
        return self._clock() < self._until.get(host, float("-inf"))

    def readmitted(self):
        """Hosts whose cooldown has ended since the last call."""
        now = self._clock()
        back = [h for h, t in self._until.items() if t <= now]
        for h in back:
            del self._until[h]
        return back

    def found(self, host):
        return host in self._found

    def has_slot(self, host, slot):
        """Whether discovery last reported slot `slot` on `host`."""
        return slot in self._found.get(host, ())

    def usable(self):
        """[(host, slot ids)]: found and not blacklisted, first seen first."""
        return [(h, self._found[h]) for h in sorted(self._found,
                                                     key=self._order.get)
                if not self.is_blacklisted(h)]

    def order(self, host):
        return self._order.get(host, len(self._order))

    def could_change(self):
        """Whether a host may yet become usable: one is cooling down."""
        now = self._clock()
        return any(now < t < float("inf") for t in self._until.values())
