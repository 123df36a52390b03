"""horovodrun's elastic mode: keeps a worker on every usable slot, forms the
job's rounds and ends the job.

A worker is one process of the user's script on one slot of one host. Its
`hvd.init()` joins the next round through the driver's round service (an
authenticated channel, horovod.runner.auth; JSON bodies of bounded size,
nothing unpickled): it sends its worker id and a port it reserved, and the
reply, once the round forms, gives its rank, size, local and cross ranks and
rank 0's address and port; the engine's own rendezvous follows. A round
forms when every live worker on a usable host has joined, and at least
-np (first round) or --min-np workers have. A worker whose host is no
longer usable is told to leave and exits with code 0.

Rank 0 of a round asks the round service at each commit whether the host
set changed (a worker is waiting to join, or a member is gone); the answer
is broadcast, so every worker raises HostsUpdatedInterrupt together.

A worker that exits with a non-zero code gets its host blacklisted
(horovod.runner.discovery.HostManager): no new worker starts there until
its cooldown ends, while the host's running workers go on. A worker whose
slot went away with it (a cluster manager's task that ended; its process
says so in `lost`) does not: the slot may come back, on any host. The job
fails when no round forms within --elastic-timeout, at once when too few
workers are left and no host can add one, when it re-forms more than
--reset-limit times, or when no host is left and none can come back. The
job succeeds when a worker that was not told to leave exits with code 0
and the others follow.

Thread-safety: the driver's state belongs to `self._lock`; the round
service's connection threads take it to register joins and answer queries,
the main thread (`run`) to reap workers, start them and form rounds.
"""

import json
import socket
import threading
import time

from horovod.runner import auth
from horovod.runner.discovery import DiscoveryError

MAX_REQUEST_BYTES = 64 * 1024
_HANDSHAKE_TIMEOUT_S = 10.0
_DISCOVERY_INTERVAL_S = 1.0
_FINISHED = "another worker completed training"
# How the job's settings are named in its errors: horovodrun's flags, unless
# the launcher (a Python API) names them otherwise.
FLAG_NAMES = {"np": "-np", "min_np": "--min-np",
              "timeout": "--elastic-timeout",
              "first_timeout": "--elastic-timeout",
              "reset_limit": "--reset-limit"}
# Variables a worker must not inherit: each round's join sets them.
_ROUND_VARS = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
               "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK",
               "HOROVOD_CROSS_SIZE", "HOROVOD_CONTROLLER_ADDR",
               "HOROVOD_CONTROLLER_PORT")


def plan_round(members, host_order):
    """Ranks for a round. `members`: [(worker id, host, slot, rank in the
    last round or None)]; `host_order(host)`: when the host was first seen.
    The member with the lowest previous rank becomes rank 0 (its state is
    the job's; a newcomer's never is), its host comes first, the other
    hosts in the order they were first seen; within a host, the veteran of
    rank 0 first, then by slot. Returns [{worker, host, rank, size,
    local_rank, local_size, cross_rank, cross_size}] in rank order."""
    veterans = [m for m in members if m[3] is not None]
    senior = min(veterans, key=lambda m: m[3]) if veterans else None
    first_host = senior[1] if senior else None
    hosts = sorted({m[1] for m in members},
                   key=lambda h: (h != first_host, host_order(h)))
    plan = []
    for cross_rank, host in enumerate(hosts):
        here = sorted((m for m in members if m[1] == host),
                      key=lambda m: (m is not senior, m[2]))
        for local_rank, m in enumerate(here):
            plan.append({"worker": m[0], "host": host, "local_rank": local_rank,
                         "local_size": len(here), "cross_rank": cross_rank,
                         "cross_size": len(hosts)})
    for rank, p in enumerate(plan):
        p["rank"], p["size"] = rank, len(plan)
    return plan


class _Join:
    """A worker waiting in the round service for its round."""

    def __init__(self, port):
        self.port = port
        self.reply = None
        self.done = threading.Event()

    def answer(self, reply):
        self.reply = reply
        self.done.set()


class RoundService:
    """Listens for workers; `handle(request)` answers each request. A
    connection must pass the secret's handshake within a bounded time
    before its single request (at most MAX_REQUEST_BYTES) is read."""

    def __init__(self, secret, bind_addr, handle):
        self._secret = secret.encode()
        self._handle = handle
        self._sock = socket.create_server((bind_addr, 0), backlog=128)
        self.port = self._sock.getsockname()[1]
        auth.serve_connections(self._sock, self._serve)

    def _serve(self, conn):
        with conn:
            try:
                conn.settimeout(_HANDSHAKE_TIMEOUT_S)
                chan = auth.serve_handshake(conn, self._secret)
                request = json.loads(chan.recv(MAX_REQUEST_BYTES).decode())
                if not isinstance(request, dict):
                    raise ValueError("request is not a JSON object")
                conn.settimeout(None)
                reply = self._handle(request)
                conn.settimeout(_HANDSHAKE_TIMEOUT_S)
                chan.send(json.dumps(reply).encode())
            except (OSError, ConnectionError, ValueError):
                pass  # a stranger, or a worker that went away

    def close(self):
        self._sock.close()


class _Worker:
    def __init__(self, wid, host, slot, proc):
        self.id = wid
        self.host = host
        self.slot = slot
        self.proc = proc          # a launch._Rank, started
        self.label = "%s:%d" % (host, slot)
        self.leaving = False      # told to leave; exits with 0
        self.last_rank = None     # rank in the last round it was in
        self.code = None          # exit code once it exited


class ElasticDriver:
    """`start_worker(wid, host, slot, env)` starts one worker process (a
    launch._Rank); `probe(host)` returns the address a host's workers
    listen on (None: loopback) or raises LaunchError when the host cannot
    take part; `addrs` holds those known already (None for `probe`: every
    host's is None). `log` writes one line for the user. `first_timeout_s`
    bounds the first round (default `timeout_s`); `names` overrides
    FLAG_NAMES in errors. After `run`, `failure` says why the job failed
    (None when it did not)."""

    def __init__(self, discovery, hosts, np, min_np, max_np, timeout_s,
                 reset_limit, secret, driver_addrs, bind_addr, start_worker,
                 probe, log, addrs=None, verbose=False, clock=time.monotonic,
                 first_timeout_s=None, names=None):
        self._discovery = discovery
        self.hosts = hosts
        self._np, self._min_np, self._max_np = np, min_np, max_np
        self._timeout_s = timeout_s
        self._first_timeout_s = (timeout_s if first_timeout_s is None
                                 else first_timeout_s)
        self._names = dict(FLAG_NAMES, **(names or {}))
        self._reset_limit = reset_limit
        self._secret = secret
        self._start_worker = start_worker
        self._probe = probe
        self._log = log
        self._verbose = verbose
        self._clock = clock
        self._lock = threading.Condition()
        self._workers = {}        # id -> _Worker, every one ever started
        self._started = 0
        self._joins = {}          # worker id -> _Join
        self._addrs = dict(addrs or {})  # host -> address (networked)
        self._probing = set()
        self._round = 0           # rounds formed so far
        self._members = []        # worker ids of the current round
        self._resets = 0
        self._waiting_since = clock()
        self._finished = False    # a worker completed training
        self._failure = None      # why the job fails
        self._late_failures = []  # workers that failed after it finished
        self._stopping = False
        self._next_discovery = 0.0
        self.service = RoundService(secret, bind_addr, self._handle)
        self.driver_spec = "%s:%d" % (",".join(driver_addrs),
                                      self.service.port)

    # -- the round service's requests (connection threads) ------------------
    def _handle(self, request):
        op = request.get("op")
        wid = request.get("worker")
        if not isinstance(wid, str):
            return {"error": "request without a worker id"}
        if op == "join":
            port = request.get("port")
            if not isinstance(port, int) or not 0 < port < 65536:
                return {"error": "join without a valid port"}
            return self._join(wid, port)
        if op == "updates":
            return self._updates(request.get("round"))
        return {"error": "unknown request %r" % (op,)}

    def _join(self, wid, port):
        join = _Join(port)
        with self._lock:
            w = self._workers.get(wid)
            if w is None or w.code is not None:
                return {"error": "worker %r is not one of this job's" % (wid,)}
            if self._finished:
                w.leaving = True
                return {"leave": _FINISHED}
            old = self._joins.get(wid)
            if old is not None:
                old.answer({"error": "joined again"})
            self._joins[wid] = join
            if self._waiting_since is None:
                self._waiting_since = self._clock()
            self._lock.notify_all()
        # Answered when the round forms, or with an error when it cannot
        # (the driver's own deadline, --elastic-timeout, comes first).
        if not join.done.wait(max(self._timeout_s,
                                  self._first_timeout_s) + 60):
            return {"error": "no round formed within %gs" % self._timeout_s}
        return join.reply

    def _updates(self, round_no):
        with self._lock:
            if round_no != self._round:
                return {"changed": True, "skip_sync": False}
            members = {w.id for w in self._eligible()}
            current = set(self._members)
            newcomers = [wid for wid in self._joins if wid not in current]
            gone = bool(current - members)
            return {"changed": bool(newcomers) or gone,
                    "skip_sync": gone and not newcomers}

    # -- membership (under the lock) ----------------------------------------
    def _eligible(self):
        """Live workers that belong in the next round, in rank-plan order,
        at most --max-np: those on a slot discovery still reports. A
        blacklisted host's running workers stay: blacklisting only keeps
        new ones off it."""
        live = [w for w in self._workers.values()
                if w.code is None and not w.leaving and
                self.hosts.has_slot(w.host, w.slot)]
        live.sort(key=lambda w: (w.last_rank is None,
                                 w.last_rank if w.last_rank is not None else 0,
                                 self.hosts.order(w.host), w.slot))
        return live[:self._max_np] if self._max_np else live

    def _form_round(self):
        members = self._eligible()
        ids = {w.id for w in members}
        for wid in [wid for wid in self._joins if wid not in ids]:
            w = self._workers[wid]
            w.leaving = True
            self._joins.pop(wid).answer({"leave": self._why_leave(w)})
        if not members or any(w.id not in self._joins for w in members):
            return
        need = self._np if self._round == 0 else self._min_np
        if len(members) < need:
            return
        if self._round > 0:
            self._resets += 1
            if self._reset_limit is not None and self._resets > self._reset_limit:
                self._fail("the job re-formed %d times, more than %s %d"
                           % (self._resets, self._names["reset_limit"],
                              self._reset_limit))
                return
        plan = plan_round([(w.id, w.host, w.slot, w.last_rank)
                           for w in members], self.hosts.order)
        root = plan[0]
        controller = self._addrs.get(root["host"]) or "127.0.0.1"
        port = self._joins[root["worker"]].port
        self._round += 1
        for p in plan:
            w = self._workers[p["worker"]]
            w.last_rank = p["rank"]
            reply = {k: p[k] for k in ("rank", "size", "local_rank",
                                       "local_size", "cross_rank",
                                       "cross_size")}
            reply.update(round=self._round, controller_addr=controller,
                         controller_port=port)
            self._joins.pop(w.id).answer(reply)
        self._members = [p["worker"] for p in plan]
        self._waiting_since = None
        self._log("round %d: %d workers on %s" % (
            self._round, len(plan), ", ".join(
                "%s(%d)" % (p["host"], p["local_size"]) for p in plan
                if p["local_rank"] == 0)))

    def _why_leave(self, w):
        if not self.hosts.found(w.host):
            return "host %s is no longer among the job's hosts" % w.host
        return "slot %s is no longer part of the job" % w.label

    # -- the main loop --------------------------------------------------------
    def run(self, interrupts):
        """Runs the job; returns its exit code."""
        try:
            self._discover()
        except DiscoveryError as e:
            self._log(str(e))
            return 1
        while True:
            with self._lock:
                self._reap()
                if interrupts or self._failure is not None:
                    break
                if self._finished and not self._running():
                    return self._finished_code()
                now = self._clock()
            if now >= self._next_discovery:
                self._next_discovery = now + _DISCOVERY_INTERVAL_S
                try:
                    self._discover()
                except DiscoveryError as e:
                    self._log("%s; keeping the hosts found before" % e)
            with self._lock:
                for h in self.hosts.readmitted():
                    self._log("host %s is back after its cooldown" % h)
                self._spawn()
                self._form_round()
                self._check_deadline()
                if self._failure is None:
                    self._lock.wait(0.05)
        return self._stop_all(interrupts)

    def _discover(self):
        added, removed = self.hosts.update(self._discovery.find())
        for h in added:
            if self._round or self._verbose:
                self._log("host %s appeared" % h)
        for h in removed:
            self._log("host %s is gone from the discovered hosts" % h)

    def _running(self):
        return [w for w in self._workers.values() if w.code is None]

    def _reap(self):
        for w in self._running():
            code = w.proc.proc.poll()
            if code is None:
                continue
            w.code = code
            self._lock.notify_all()
            if self._stopping or w.leaving:
                continue
            if code == 0:
                self._finished = True
                for wid, join in self._joins.items():
                    self._workers[wid].leaving = True
                    join.answer({"leave": _FINISHED})
                self._joins.clear()
                continue
            if self._finished:
                self._late_failures.append(w)
                continue
            lost = getattr(w.proc, "lost", None)
            if lost:
                self._log("worker %s is gone with its slot (%s)"
                          % (w.label, lost))
                self._next_discovery = 0.0  # before a worker is started there
            else:
                self._blacklist(w.host, "worker %s exited with code %d"
                                % (w.label, code))
            if self._waiting_since is None:
                self._waiting_since = self._clock()

    def _spawn(self):
        if self._finished or self._failure is not None:
            return
        held = {(w.host, w.slot) for w in self._running()}
        count = len([w for w in self._running() if not w.leaving])
        for host, slots in self.hosts.usable():
            if host not in self._addrs:
                self._start_probe(host)
                continue
            for slot in slots:
                if self._max_np and count >= self._max_np:
                    return
                if (host, slot) in held:
                    continue
                self._started += 1
                wid = "%s:%d#%d" % (host, slot, self._started)
                env = {"HOROVOD_ELASTIC_DRIVER": self.driver_spec,
                       "HOROVOD_ELASTIC_WORKER": wid,
                       "HOROVOD_ELASTIC_TIMEOUT": str(self._timeout_s),
                       "HOROVOD_HOSTNAME": host}
                if self._addrs[host] is not None:
                    env["HOROVOD_BIND_ADDR"] = self._addrs[host]
                self._workers[wid] = _Worker(
                    wid, host, slot, self._start_worker(wid, host, slot, env))
                count += 1

    def _blacklist(self, host, why):
        cooldown = self.hosts.blacklist(host)
        self._log("%s; host %s is blacklisted %s" % (
            why, host, "for the rest of the job" if cooldown is None
            else "for %gs" % cooldown))

    def _start_probe(self, host):
        if self._probe is None:
            self._addrs[host] = None
            return
        if host in self._probing:
            return
        self._probing.add(host)

        def probe():
            try:
                addr = self._probe(host)
            except Exception as e:  # noqa: BLE001 - reported, host left out
                with self._lock:
                    self._probing.discard(host)
                    self._blacklist(host, "cannot use host %s (%s)" % (host, e))
                return
            with self._lock:
                self._probing.discard(host)
                self._addrs[host] = addr
                self._lock.notify_all()

        threading.Thread(target=probe, daemon=True).start()

    def _check_deadline(self):
        if self._failure is not None or self._finished:
            return
        if not self._running() and not self._probing and \
                not self.hosts.usable() and \
                not self.hosts.could_change() and \
                not self._discovery.may_add:
            self._fail("no host is left: every host was blacklisted after "
                       "its workers failed")
            return
        if self._waiting_since is None:
            return
        members = self._eligible()
        need, setting = ((self._np, "np") if self._round == 0
                         else (self._min_np, "min_np"))
        short = "only %d of the %d workers needed (%s) were available" % (
            len(members), need, self._names[setting])
        if len(members) < need and not self._can_grow():
            self._fail(short + ", and no more can start: no usable host has a "
                       "free slot and none can be added")
            return
        waited = self._clock() - self._waiting_since
        limit = self._first_timeout_s if self._round == 0 else self._timeout_s
        if waited < limit:
            return
        timeout = self._names["first_timeout" if self._round == 0
                              else "timeout"]
        if len(members) < need:
            self._fail("%s for %gs (%s)" % (short, waited, timeout))
        else:
            late = [w.label for w in members if w.id not in self._joins]
            self._fail("worker%s %s did not join round %d within %gs (%s)"
                       % ("s" if len(late) > 1 else "", ", ".join(late),
                          self._round + 1, waited, timeout))

    def _can_grow(self):
        """Whether a worker may yet start: a usable slot is free (or will
        be, when a worker told to leave exits), a host is being probed or
        cooling down, or discovery may add one."""
        if self._probing or self.hosts.could_change() or \
                self._discovery.may_add:
            return True
        held = {(w.host, w.slot) for w in self._running() if not w.leaving}
        return any((host, slot) not in held
                   for host, slots in self.hosts.usable() for slot in slots)

    def rediscover(self):
        """Asks for discovery at the next turn of the loop instead of at
        its interval (a launcher whose discovery knows when hosts change)."""
        with self._lock:
            self._next_discovery = 0.0
            self._lock.notify_all()

    def fail(self, why):
        """Stops the job from another thread (the launcher's watch on its
        cluster manager), unless it has already ended."""
        with self._lock:
            if self._failure is None and not self._finished:
                self._fail(why)
            self._lock.notify_all()

    @property
    def failure(self):
        with self._lock:
            return self._failure

    def _fail(self, why):
        self._failure = why
        for join in self._joins.values():
            join.answer({"error": "horovodrun stopped the job: " + why})
        self._joins.clear()

    def _finished_code(self):
        self.service.close()
        for w in self._late_failures:
            self._log("worker %s exited with code %d after training completed"
                      % (w.label, w.code))
        return 1 if self._late_failures else 0

    def signal_all(self, sig):
        with self._lock:
            procs = [w.proc for w in self._running()]
        for p in procs:
            p.signal(sig)

    def _stop_all(self, interrupts):
        with self._lock:
            self._stopping = True
            procs = [w.proc for w in self._running()]
        from horovod.runner.launch import stop_ranks
        stop_ranks(procs, interrupts=interrupts)
        self.service.close()
        if interrupts:
            return 130
        self._log("job failed: %s" % self._failure)
        return 1


def worker_env(base):
    """The launcher's environment as a worker's starting point."""
    return {k: v for k, v in base.items() if k not in _ROUND_VARS}

