"""An elastic worker's side of horovodrun's round service (see
horovod.runner.elastic_driver): joining each round at init, and rank 0's
question at each commit whether the job's hosts changed.

horovodrun sets HOROVOD_ELASTIC_DRIVER ("addr[,addr...]:port"),
HOROVOD_ELASTIC_WORKER (this worker's id), HOROVOD_ELASTIC_TIMEOUT and
HOROVOD_SECRET_KEY. Every connection proves the secret both ways before a
byte of a request is read (horovod.runner.auth); bodies are bounded JSON.

Thread-safety: a `DriverClient` is used under HorovodBasics' lock (join)
or by the one thread that commits (host_updates).
"""

import json
import os
import socket
import sys

from horovod.common.exceptions import HorovodInternalError

MAX_REPLY_BYTES = 64 * 1024
_CONNECT_TIMEOUT_S = 10.0
# Beyond the driver's own deadline, which answers first.
_SLACK_S = 90.0
_ASSIGNMENT = (("rank", "HOROVOD_RANK"), ("size", "HOROVOD_SIZE"),
               ("local_rank", "HOROVOD_LOCAL_RANK"),
               ("local_size", "HOROVOD_LOCAL_SIZE"),
               ("cross_rank", "HOROVOD_CROSS_RANK"),
               ("cross_size", "HOROVOD_CROSS_SIZE"),
               ("controller_addr", "HOROVOD_CONTROLLER_ADDR"),
               ("controller_port", "HOROVOD_CONTROLLER_PORT"))


class DriverClient:
    def __init__(self, spec, worker, secret, timeout_s):
        addrs, _, port = spec.rpartition(":")
        if not addrs or not port.isdigit():
            raise ValueError("HOROVOD_ELASTIC_DRIVER=%r is not addr:port" % spec)
        self._addrs = addrs.split(",")
        self._port = int(port)
        self.worker = worker
        self._secret = secret.encode()
        self._timeout_s = timeout_s
        self.round = None

    @classmethod
    def from_environment(cls):
        """The client when horovodrun's elastic mode started this process,
        else None."""
        spec = os.environ.get("HOROVOD_ELASTIC_DRIVER")
        if not spec:
            return None
        return cls(spec, os.environ.get("HOROVOD_ELASTIC_WORKER", ""),
                   os.environ.get("HOROVOD_SECRET_KEY", ""),
                   float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", 600)))

    def _ask(self, request, timeout_s):
        from horovod.runner import auth
        errors = []
        for addr in self._addrs:
            try:
                sock = socket.create_connection((addr, self._port),
                                                timeout=_CONNECT_TIMEOUT_S)
            except OSError as e:
                errors.append("%s: %s" % (addr, e.strerror or e))
                continue
            with sock:
                try:
                    chan = auth.client_handshake(sock, self._secret)
                    chan.send(json.dumps(request).encode())
                    sock.settimeout(timeout_s)
                    reply = json.loads(chan.recv(MAX_REPLY_BYTES).decode())
                except (OSError, ConnectionError, ValueError) as e:
                    raise HorovodInternalError(
                        "horovodrun's elastic driver at %s:%d did not answer: "
                        "%s" % (addr, self._port, e)) from None
            if not isinstance(reply, dict):
                raise HorovodInternalError("horovodrun's elastic driver sent "
                                           "a malformed reply")
            return reply
        raise HorovodInternalError("cannot reach horovodrun's elastic driver "
                                   "(%s)" % "; ".join(errors))

    def join(self, bind_addr):
        """Waits for the next round and sets this process's HOROVOD_RANK,
        SIZE, ... for the engine. A worker told to leave exits with code 0
        (SystemExit)."""
        # A port for the engine's controller, should this worker become rank
        # 0: held while waiting so no other worker on this host reports it.
        from horovod.runner.placement import reserve_port

        reserve = reserve_port(bind_addr or "127.0.0.1")
        try:
            reply = self._ask({"op": "join", "worker": self.worker,
                               "port": reserve.getsockname()[1]},
                              self._timeout_s + _SLACK_S)
        finally:
            reserve.close()
        if "leave" in reply:
            sys.stderr.write("horovod: this worker leaves the job: %s\n"
                             % reply["leave"])
            sys.stderr.flush()
            raise SystemExit(0)
        if "error" in reply:
            raise HorovodInternalError("horovodrun's elastic driver: %s"
                                       % reply["error"])
        try:
            values = {var: str(int(reply[key])) if key != "controller_addr"
                      else str(reply[key]) for key, var in _ASSIGNMENT}
            self.round = int(reply["round"])
        except (KeyError, TypeError, ValueError):
            raise HorovodInternalError("horovodrun's elastic driver sent an "
                                       "incomplete assignment") from None
        os.environ.update(values)
        return reply

    def host_updates(self):
        """{"changed": bool, "skip_sync": bool} for the round this worker is
        in; unchanged when the driver cannot be asked (it is stopping)."""
        try:
            reply = self._ask({"op": "updates", "worker": self.worker,
                               "round": self.round}, _CONNECT_TIMEOUT_S)
        except HorovodInternalError:
            return {"changed": False, "skip_sync": False}
        return {"changed": bool(reply.get("changed")),
                "skip_sync": bool(reply.get("skip_sync"))}
