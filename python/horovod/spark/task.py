"""The executor's side of `horovod.spark.run`: one Spark barrier task per
rank. The tasks agree on their ranks through the barrier context, start
the rank as a child process (`horovod.runner.run_task`, which takes the
function from the driver and sends back its result) and relay the child's
output to the driver.

What the tasks exchange through the barrier (`allGather`) is JSON under an
HMAC with the job's secret: a host key, an address and a reserved port per
task, never anything that is unpickled. The secret itself reaches the
executors inside the task's closure, over Spark's own channel to them.

A child dies with the Python worker that started it (PR_SET_PDEATHSIG),
so a task that Spark kills, or an executor that dies, leaves no rank
behind.
"""

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading

from horovod.runner import auth
from horovod.runner.hosts import die_with_parent
from horovod.runner.placement import (assign_ranks, host_key, rank_env,
                                      reserve_port)

# Output relayed per frame: a kind byte (b"o" stdout, b"e" stderr), then
# the bytes as they came.
MAX_OUTPUT_FRAME = 1 << 16


class TaskError(RuntimeError):
    pass


def _signed(secret, body):
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest() + \
        " " + body


def _verified(secret, message):
    tag, _, body = message.partition(" ")
    want = hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(tag.encode(), want.encode()):
        raise TaskError("a barrier message failed the job's integrity check")
    peer = json.loads(body)
    if not (isinstance(peer, dict) and isinstance(peer.get("host"), str)
            and isinstance(peer.get("addr"), str)
            and isinstance(peer.get("port"), int)
            and isinstance(peer.get("partition"), int)):
        raise TaskError("a barrier message is malformed: %r" % body[:200])
    return peer


def bind_address(executor_addr, nics):
    """The address this task's rank listens on: its executor's, or that of
    the first of `nics` this host has."""
    if nics:
        from horovod.runner.probe import nic_address
        try:
            return nic_address(nics)
        except ValueError as e:
            raise TaskError(str(e)) from None
    try:
        return socket.gethostbyname(executor_addr)
    except OSError as e:
        raise TaskError("cannot resolve this executor's address %r: %s"
                        % (executor_addr, e)) from None


class _Relay:
    """Sends a child's output to the driver as it comes: one authenticated
    connection, frames from two reader threads under one lock. When the
    driver cannot be reached the output is still read (and dropped), so
    the child never blocks on a full pipe."""

    def __init__(self, job, label):
        self._lock = threading.Lock()
        self._channel = None
        self._sock = None
        try:
            self._sock = socket.create_connection(
                (job["driver_addr"], job["driver_port"]), timeout=30)
            self._channel = auth.client_handshake(
                self._sock, bytes.fromhex(job["secret"]))
            self._channel.send(("output %s" % label).encode())
            self._sock.settimeout(None)
        except (OSError, ConnectionError):
            self.close()

    def pump(self, stream, kind):
        fd = stream.fileno()
        while True:
            chunk = os.read(fd, MAX_OUTPUT_FRAME)
            if not chunk:
                return
            with self._lock:
                if self._channel is None:
                    continue
                try:
                    self._channel.send(kind + chunk)
                except (OSError, ConnectionError):
                    self._channel = None

    def close(self):
        self._channel = None
        if self._sock is not None:
            self._sock.close()


class RankProcess:
    """A rank's process (`horovod.runner.run_task` under the job's
    executable) started by a task with environment `env`, its output
    relayed to the driver under `label`; it dies with the task's Python
    worker."""

    def __init__(self, job, env, label):
        command = [job["executable"] or sys.executable, "-m",
                   "horovod.runner.run_task"]
        self._relay = _Relay(job, label)
        self.proc = subprocess.Popen(command, env=env,
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     preexec_fn=die_with_parent)
        self._pumps = [threading.Thread(target=self._relay.pump, args=(s, k),
                                        daemon=True)
                       for s, k in ((self.proc.stdout, b"o"),
                                    (self.proc.stderr, b"e"))]
        for t in self._pumps:
            t.start()

    def wait(self):
        """Waits for the process and the last of its output; returns its
        exit code."""
        code = self.proc.wait()
        for t in self._pumps:
            t.join()
        self._relay.close()
        return code


def child_env(job, extra):
    """A rank's environment: the executor's, the job's `env`, `extra`, and
    where the driver serves the function."""
    env = dict(os.environ)
    env.update(job["env"])
    env.update(extra)
    env.update({"HOROVOD_RUN_ADDR": job["driver_addr"],
                "HOROVOD_RUN_PORT": str(job["driver_port"])})
    return env


def run_rank(job, _rows):
    """The barrier task (a partial of this with the job's settings is what
    Spark runs): yields (rank, the child's exit code)."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    secret = bytes.fromhex(job["secret"])
    partition = ctx.partitionId()
    executor = ctx.getTaskInfos()[partition].address.rsplit(":", 1)[0]
    bind = bind_address(executor, job["nics"])
    host = host_key()
    # Held until the child starts, so no other task on this host reports
    # the same port; rank 0's becomes the controller's.
    reserve = reserve_port(bind)
    try:
        mine = {"partition": partition, "host": host, "addr": bind,
                "port": reserve.getsockname()[1]}
        peers = [_verified(secret, m) for m in
                 ctx.allGather(_signed(secret, json.dumps(mine)))]
    finally:
        reserve.close()
    peers.sort(key=lambda p: p["partition"])
    places = assign_ranks([p["host"] for p in peers])
    place = places[partition]
    first = peers[next(i for i, p in enumerate(places) if p["rank"] == 0)]
    env = child_env(job, rank_env(place, host, bind, first["addr"],
                                  first["port"], job["secret"]))
    code = RankProcess(job, env, place["rank"]).wait()
    yield place["rank"], code
