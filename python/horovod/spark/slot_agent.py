"""The executor's side of `horovod.spark.run_elastic`: a slot agent, one
long-lived Spark task per slot of the elastic job.

PySpark cannot place a task on an executor of its choosing, so the driver
does not start workers as tasks: each task (partition p of the job's one
stage) connects to the driver's service, proves it knows the job's secret
(horovod.runner.auth), registers slot p with its host key and address, and
then starts and signals one worker process at a time as the driver's
elastic driver asks. An executor that dies takes its agent and worker
along; Spark's task retry brings the slot back, on whichever executor it
picks, and the agent registers again.

Messages are JSON in authenticated frames, each of bounded size, in both
directions; nothing is unpickled. Both ends send a heartbeat every
HEARTBEAT_S, and an end silent for PEER_TIMEOUT_S counts as gone (a host
that vanished leaves a TCP connection open): the agent then kills its
worker and fails its task, which Spark retries.

Thread-safety: the agent's main thread reads commands; a waiter thread per
worker and a heartbeat thread send events under `SlotAgent._lock`.
"""

import json
import signal
import socket
import threading

from horovod.runner import auth
from horovod.runner.placement import host_key
from horovod.spark.task import RankProcess, TaskError, child_env

HEARTBEAT_S = 5.0
PEER_TIMEOUT_S = 30.0
# A start command carries the worker's environment.
MAX_MESSAGE_BYTES = 1 << 20
_SIGNALS = {int(signal.SIGINT), int(signal.SIGTERM), int(signal.SIGKILL)}


def decode(frame):
    """A message (a JSON object) from its frame; ValueError if it is not."""
    message = json.loads(frame.decode())
    if not isinstance(message, dict):
        raise ValueError("a message is not a JSON object")
    return message


def require(message, fields):
    """`message` once its `fields` ({name: type}) are present and typed;
    ValueError naming the first that is not."""
    for name, kind in fields.items():
        if not isinstance(message.get(name), kind) or \
                isinstance(message.get(name), bool):
            raise ValueError("a message lacks a valid %r: %.200r"
                             % (name, message))
    return message


def agent_address(driver_addr, nics):
    """The address this slot's workers listen on: that of the first of
    `nics` this host has, or the one on the route to the driver."""
    from horovod.runner.probe import address_toward, nic_address
    try:
        if nics:
            return nic_address(nics)
        return address_toward(socket.gethostbyname(driver_addr))
    except (ValueError, OSError) as e:
        raise TaskError("cannot find this slot's address: %s" % e) from None


class SlotAgent:
    """Serves one registered slot over `channel` (its socket `sock`) until
    the driver says done; raises TaskError when the driver goes silent or
    away before that, so Spark retries the task and the slot registers
    again (the task would otherwise count as done, and the slot be lost for
    the rest of the job)."""

    def __init__(self, job, channel, sock):
        self._job = job
        self._channel = channel
        self._sock = sock
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._worker = None  # (worker id, RankProcess) while one runs

    def _send(self, message):
        with self._lock:
            if self._closed.is_set():
                return
            try:
                self._channel.send(json.dumps(message).encode())
            except (OSError, ConnectionError):
                self._closed.set()

    def serve(self):
        threading.Thread(target=self._heartbeat, daemon=True).start()
        self._sock.settimeout(PEER_TIMEOUT_S)
        try:
            while True:
                message = require(
                    decode(self._channel.recv(MAX_MESSAGE_BYTES)),
                    {"cmd": str})
                if message["cmd"] == "done":
                    return
                if message["cmd"] == "start":
                    self._start(require(message, {"worker": str,
                                                  "label": str, "env": dict}))
                elif message["cmd"] == "signal":
                    self._signal(require(message, {"worker": str,
                                                   "sig": int}))
        except (OSError, ConnectionError, ValueError) as e:
            raise TaskError("slot agent lost horovod.spark.run_elastic's "
                            "driver: %s" % (str(e) or type(e).__name__)) \
                from None
        finally:
            self._closed.set()
            with self._lock:
                running = self._worker
            if running is not None:
                running[1].proc.kill()
                running[1].wait()
            self._sock.close()

    def _heartbeat(self):
        while not self._closed.wait(HEARTBEAT_S):
            self._send({"event": "ping"})

    def _start(self, message):
        wid = message["worker"]
        env = message["env"]
        if not all(isinstance(k, str) and isinstance(v, str)
                   for k, v in env.items()):
            raise ValueError("a start command's environment is not strings")
        with self._lock:
            busy = self._worker is not None
        if busy:
            # The driver starts a worker only on a free slot; a second one
            # here means its view is stale: that worker never ran.
            self._send({"event": "refused", "worker": wid,
                        "why": "slot busy with another worker"})
            return
        env = dict(env)
        env.update({"HOROVOD_SECRET_KEY": self._job["secret"],
                    "PYTHONUNBUFFERED": "1"})
        try:
            rank = RankProcess(self._job, child_env(self._job, env),
                               message["label"])
        except OSError as e:
            self._send({"event": "exited", "worker": wid, "code": 127})
            raise TaskError("cannot start a worker: %s" % e) from None
        with self._lock:
            self._worker = (wid, rank)
        threading.Thread(target=self._wait, args=(wid, rank),
                         daemon=True).start()

    def _wait(self, wid, rank):
        code = rank.wait()
        with self._lock:
            self._worker = None
        self._send({"event": "exited", "worker": wid, "code": code})

    def _signal(self, message):
        if message["sig"] not in _SIGNALS:
            raise ValueError("signal %d is not one the driver sends"
                             % message["sig"])
        with self._lock:
            running = self._worker
        if running is not None and running[0] == message["worker"]:
            try:
                running[1].proc.send_signal(message["sig"])
            except ProcessLookupError:
                pass


def run_agent(job, _rows):
    """The Spark task of one slot (a partial of this with the job's
    settings is what Spark runs): yields (slot, attempt) once the driver
    says the job is done; raises TaskError when it cannot reach the
    driver."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    slot, attempt = ctx.partitionId(), ctx.attemptNumber()
    where = (job["driver_addr"], job["driver_port"])
    registration = {"slot": slot, "host": host_key(),
                    "addr": agent_address(job["driver_addr"], job["nics"])}
    try:
        sock = socket.create_connection(where, timeout=PEER_TIMEOUT_S)
    except OSError as e:
        raise TaskError("slot %d cannot reach horovod.spark.run_elastic's "
                        "driver at %s:%d: %s" % ((slot,) + where + (e,))) \
            from None
    try:
        channel = auth.client_handshake(sock, bytes.fromhex(job["secret"]))
        channel.send(b"agent")
        channel.send(json.dumps(registration).encode())
    except (OSError, ConnectionError) as e:
        sock.close()
        raise TaskError("slot %d cannot register with horovod.spark."
                        "run_elastic's driver at %s:%d: %s"
                        % ((slot,) + where + (e,))) from None
    SlotAgent(job, channel, sock).serve()
    yield slot, attempt
