"""`horovod.spark.run_elastic`: an elastic Horovod job (hvd.elastic) on
Spark's executors, from `min_num_proc` up to `max_num_proc` workers.

The driver runs horovodrun's own elastic driver
(horovod.runner.elastic_driver) with Spark in place of ssh. The job's
Spark stage has `max_num_proc` long-lived tasks, the slot agents
(horovod.spark.slot_agent); each registers its slot with this driver's
service, and the hosts the elastic driver sees are the host keys of the
agents registered, with their slot numbers. A worker is a process started
by the agent of its slot (`horovod.runner.run_task`, which takes the
function from this service and sends back its result); it joins rounds
through the round service as horovodrun's workers do.

A worker that raises gets its host blacklisted (horovodrun's rules) while
the others go on. A worker whose agent disappears (its executor died or
was taken away) blacklists nothing: Spark retries the task, on any
executor, and the slot comes back when its agent registers again; the
stage fails for good only after `spark.task.maxFailures` attempts of one
slot, and so does the job then.

Thread-safety: one call of `run_elastic` per thread; each call has its own
job group, service, agents and threads. `_Agents` is shared by the
service's connection threads and the elastic driver's thread under its
lock.
"""

import functools
import json
import secrets
import socket
import sys
import threading
import time
import uuid

from horovod.runner import discovery, run_api
from horovod.runner.elastic_driver import ElasticDriver
from horovod.runner.output import Output
from horovod.spark import slot_agent
from horovod.spark.runner import (RunService, SparkJob, active_context,
                                  byte_sink, driver_address, spark_error,
                                  start_timeout_or_default, timeout_or_default)

_CALLER = "horovod.spark.run_elastic"
_DEFAULT_ELASTIC_TIMEOUT_S = 600.0
# How long a worker's end may take to be reported once it was killed.
_KILL_WAIT_S = 30.0
_NAMES = {"np": "num_proc", "min_np": "min_num_proc",
          "timeout": "elastic_timeout", "first_timeout": "start_timeout",
          "reset_limit": "reset_limit"}


class _WorkerProcess:
    """A worker started through a slot agent, as the elastic driver sees a
    process: poll() is None while it runs, then its exit code (-9 when its
    agent went away, `lost` saying why); signal() reaches it through the
    agent."""

    header = None

    def __init__(self, agent, wid):
        self.proc = self
        self.agent = agent
        self.wid = wid
        self.code = None
        self.lost = None
        self._ended = threading.Event()

    def end(self, code, lost=None):
        if not self._ended.is_set():
            self.code, self.lost = code, lost
            self._ended.set()

    def poll(self):
        return self.code

    def wait(self, timeout=None):
        """The exit code, or None when it has not ended within `timeout`.
        Without one, waits at most _KILL_WAIT_S: an agent that has not
        reported its worker's end by then counts as gone."""
        if timeout is not None:
            self._ended.wait(timeout)
            return self.code
        if not self._ended.wait(_KILL_WAIT_S):
            self.agent.close()
            self.end(-9, "its slot agent did not report its end")
        return self.code

    def signal(self, sig):
        if self.code is None:
            self.agent.send({"cmd": "signal", "worker": self.wid,
                             "sig": int(sig)})


class _Agent:
    """The driver's end of one slot agent's connection."""

    def __init__(self, registration, channel, conn):
        self.slot = registration["slot"]
        self.host = registration["host"]
        self.addr = registration["addr"]
        self._channel = channel
        self._conn = conn
        self.lock = threading.Lock()
        self.worker = None  # the _WorkerProcess it runs, if any
        self.gone = None    # why its connection ended

    def send(self, message):
        with self.lock:
            if self.gone is not None:
                return
            try:
                self._channel.send(json.dumps(message).encode())
            except (OSError, ConnectionError):
                self.close()  # its reader ends, and says why

    def close(self):
        try:
            self._conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Agents:
    """The slot agents registered now: the elastic driver's discovery
    ({host key: slots}) and its way to start workers."""

    def __init__(self, spark_job, max_slots):
        self._spark_job = spark_job
        self._max_slots = max_slots
        self._lock = threading.Lock()
        self._by_slot = {}  # slot -> _Agent, live ones
        self._reported = {}  # what find() returned last
        self.on_change = lambda: None  # an agent came or went

    @property
    def may_add(self):
        """A slot may appear that find() has not reported: one registered
        since, or one with no agent while the stage runs (its task waits
        for an executor, or will be retried)."""
        with self._lock:
            return self._found() != self._reported or (
                not self._spark_job.done.is_set() and
                len(self._by_slot) < self._max_slots)

    def _found(self):
        found = {}
        for slot, agent in sorted(self._by_slot.items()):
            found.setdefault(agent.host, []).append(slot)
        return found

    def find(self):
        with self._lock:
            self._reported = self._found()
            return dict(self._reported)

    def address(self, host):
        """The address the workers of `host` listen on (the elastic
        driver's probe)."""
        with self._lock:
            addrs = [a.addr for a in self._by_slot.values() if a.host == host]
        if not addrs:
            raise RuntimeError("no slot agent is registered on host %s" % host)
        return addrs[0]

    def serve(self, channel, conn):
        """One agent's connection, on the service's thread for it."""
        try:
            agent = _Agent(slot_agent.require(
                slot_agent.decode(channel.recv(4096)),
                {"slot": int, "host": str, "addr": str}),
                channel, conn)
        except (OSError, ConnectionError, ValueError):
            return
        if not 0 <= agent.slot < self._max_slots:
            return
        with self._lock:
            old = self._by_slot.get(agent.slot)
            self._by_slot[agent.slot] = agent
        if old is not None:
            old.close()  # an attempt Spark gave up on
        self.on_change()
        why = "its connection closed"
        conn.settimeout(slot_agent.PEER_TIMEOUT_S)
        try:
            while True:
                event = slot_agent.require(slot_agent.decode(
                    channel.recv(slot_agent.MAX_MESSAGE_BYTES)),
                    {"event": str})
                if event["event"] in ("exited", "refused"):
                    self._ended(agent, event)
        except (OSError, ConnectionError, ValueError) as e:
            why = str(e) or type(e).__name__
        finally:
            with self._lock:
                if self._by_slot.get(agent.slot) is agent:
                    del self._by_slot[agent.slot]
            self.on_change()
            with agent.lock:
                agent.gone = why
                worker, agent.worker = agent.worker, None
            if worker is not None:
                worker.end(-9, "the Spark task of slot %d ended: %s"
                           % (agent.slot, why))

    @staticmethod
    def _ended(agent, event):
        slot_agent.require(event, {"worker": str})
        with agent.lock:
            worker = agent.worker
            if worker is None or worker.wid != event["worker"]:
                return
            agent.worker = None
        if event["event"] == "refused":
            worker.end(-9, "slot %d refused it: %s"
                       % (agent.slot, event.get("why")))
        else:
            worker.end(slot_agent.require(event, {"code": int})["code"])

    def start(self, slot, wid, label, env):
        """Asks the agent of `slot` to start worker `wid`."""
        with self._lock:
            agent = self._by_slot.get(slot)
        worker = _WorkerProcess(agent, wid)
        if agent is None:
            worker.end(-9, "slot %d has no agent" % slot)
            return worker
        with agent.lock:
            if agent.gone is not None:
                worker.end(-9, "the Spark task of slot %d ended" % slot)
                return worker
            agent.worker = worker
        agent.send({"cmd": "start", "worker": wid, "label": label,
                    "env": env})
        return worker

    def tell_all(self, message):
        with self._lock:
            agents = list(self._by_slot.values())
        for a in agents:
            a.send(message)


class _ElasticService(RunService):
    """horovod.spark.run's service plus the slot agents' connections."""

    def __init__(self, payload, output, stdout, stderr, agents):
        super().__init__(payload, output, stdout, stderr)
        self.agents = agents

    def _dispatch(self, who, channel, conn):
        if who == "agent":
            return self.agents.serve(channel, conn)
        return super()._dispatch(who, channel, conn)


def _alias(value, old, name, old_name):
    if old is not None and value is not None and old != value:
        raise ValueError("horovod.spark.run_elastic: %s=%r and %s=%r disagree"
                         % (name, value, old_name, old))
    return value if value is not None else old


def _sizes(sc, num_proc, min_num_proc, max_num_proc):
    if num_proc is None:
        num_proc = min_num_proc or sc.defaultParallelism
    if min_num_proc is None:
        min_num_proc = num_proc
    if max_num_proc is None:
        max_num_proc = num_proc
    for name, value in (("num_proc", num_proc), ("min_num_proc", min_num_proc),
                        ("max_num_proc", max_num_proc)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError("horovod.spark.run_elastic: %s=%r is not a "
                             "positive integer" % (name, value))
    if not min_num_proc <= num_proc <= max_num_proc:
        raise ValueError("horovod.spark.run_elastic: needs min_num_proc <= "
                         "num_proc <= max_num_proc, not %d, %d, %d"
                         % (min_num_proc, num_proc, max_num_proc))
    return num_proc, min_num_proc, max_num_proc


def run_elastic(fn, args=(), kwargs=None, num_proc=None, min_num_proc=None,
                max_num_proc=None, start_timeout=None, elastic_timeout=None,
                reset_limit=None, env=None, stdout=None, stderr=None,
                verbose=1, nics=None, prefix_output_with_timestamp=False,
                min_np=None, max_np=None, executable=None):
    """Runs fn(*args, **kwargs), which trains through hvd.elastic.run, as
    an elastic job on Spark's executors; returns the values of the last
    round's workers, rank 0's first.

    num_proc: workers of the first round (default: the context's default
    parallelism); min_num_proc (default num_proc) and max_num_proc
    (default num_proc): the job's smallest and largest size (min_np and
    max_np are older names). The Spark stage has max_num_proc tasks, each
    a slot that can hold one worker. start_timeout: seconds for the first
    round to form (default 600, or HOROVOD_SPARK_START_TIMEOUT);
    elastic_timeout: for a later one (default 600, or
    HOROVOD_ELASTIC_TIMEOUT); reset_limit: how often the job may re-form.
    env, stdout, stderr, nics, prefix_output_with_timestamp, executable:
    as for horovod.spark.run (output is labelled with each worker's host
    and slot). verbose: 0 is quiet, 1 (default) and up report each round
    and each worker that fails or leaves.

    Raises RuntimeError naming why when the job fails; the exception of a
    worker that raised is its cause."""
    sc = active_context("horovod.spark.run_elastic")
    min_num_proc = _alias(min_num_proc, min_np, "min_num_proc", "min_np")
    max_num_proc = _alias(max_num_proc, max_np, "max_num_proc", "max_np")
    num_proc, min_num_proc, max_num_proc = _sizes(sc, num_proc, min_num_proc,
                                                  max_num_proc)
    start_timeout = start_timeout_or_default(start_timeout, _CALLER)
    elastic_timeout = timeout_or_default(
        elastic_timeout, "elastic_timeout", "HOROVOD_ELASTIC_TIMEOUT",
        _DEFAULT_ELASTIC_TIMEOUT_S, _CALLER)
    if isinstance(nics, str):
        nics = [nics]
    secret = secrets.token_hex(32)
    output = Output(size=max_num_proc, timestamps=prefix_output_with_timestamp)
    job = {"secret": secret, "env": {str(k): str(v) for k, v in
                                     (env or {}).items()},
           "executable": executable, "nics": list(nics or [])}
    # The stage's tasks need the service's address, the service needs the
    # agents, and they need the stage: built in that order, then wired.
    spark_job = SparkJob(sc, "horovod.spark.run_elastic-" + uuid.uuid4().hex,
                         "horovod.spark.run_elastic", max_num_proc,
                         functools.partial(slot_agent.run_agent, job),
                         barrier=False)
    agents = _Agents(spark_job, max_num_proc)
    service = _ElasticService(
        run_api.function_payload(_CALLER, fn, args, kwargs), output,
        byte_sink(stdout or sys.stdout), byte_sink(stderr or sys.stderr),
        agents)
    addr, port = service.start(driver_address(sc), secret)
    job.update(driver_addr=addr, driver_port=port)

    def log(line):
        if verbose >= 1:
            sys.stderr.write("horovod.spark.run_elastic: %s\n" % line)
            sys.stderr.flush()

    def start_worker(wid, host, slot, extra):
        # Labelled by host name alone: a host key adds the boot id.
        return agents.start(slot, wid, "%s:%d" % (host.split("/")[0], slot),
                            extra)

    driver = ElasticDriver(
        agents, discovery.HostManager(), num_proc, min_num_proc, max_num_proc,
        elastic_timeout, reset_limit, secret, [addr], addr, start_worker,
        agents.address, log, first_timeout_s=start_timeout, names=_NAMES)
    agents.on_change = driver.rediscover
    stop = threading.Event()
    watch = threading.Thread(target=_watch, args=(spark_job, agents, driver,
                                                  stop), daemon=True)
    try:
        spark_job.start()
        watch.start()
        code = driver.run([])
        # Before the stage is cancelled: whether it had failed on its own.
        stage_error = _stage_error(spark_job)
    finally:
        stop.set()
        agents.tell_all({"cmd": "done"})
        spark_job.cancel()
        service.close()
        for t in list(service.pumps):
            t.join(5.0)
    return _results(service, code, driver.failure, stage_error)


def _stage_error(spark_job):
    """Why the stage ended, if it has: the job's real cause then, whatever
    the elastic driver saw of it first (its agents vanishing)."""
    if not spark_job.done.is_set():
        return None
    return "the Spark job failed: %s" % (
        spark_error(spark_job.error) if spark_job.error is not None
        else "its tasks ended")


def _watch(spark_job, agents, driver, stop):
    """Heartbeats to the agents; fails the job when its stage ends first."""
    pinged = time.monotonic()
    while not stop.wait(0.2):
        why = _stage_error(spark_job)
        if why is not None:
            driver.fail(why)
            return
        if time.monotonic() - pinged >= slot_agent.HEARTBEAT_S:
            pinged = time.monotonic()
            agents.tell_all({"cmd": "ping"})


def _results(service, code, failure, stage_error):
    with service.lock:
        blobs = list(service.results.values())
    done = run_api.outcomes(blobs, code == 0)
    # Of the workers whose own code raised, the first to arrive (ranks
    # change from round to round); else the first error about a peer. A
    # worker that raised usually reports first, but not always: its peers'
    # collectives may fail, and they report, while it is still on its way.
    failures = run_api.cause_first(
        [(r, o[1]) for r, o in done.items() if not o[0]])
    failed = failures[0][1] if failures else None
    if code != 0 or not done:
        why = stage_error or failure or "exit code %d" % code
        error = RuntimeError("horovod.spark.run_elastic: the job failed: %s"
                             % why)
        raise error from failed
    return run_api.in_rank_order(done, len(done), "horovod.spark.run_elastic")
