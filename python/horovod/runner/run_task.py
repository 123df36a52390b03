"""One rank of `horovod.run`: fetches the function from the launcher
(HOROVOD_RUN_ADDR/PORT), runs it and sends back its return value, or the
exception it raised (then exits with code 1), with the rank it ended at
(an elastic worker's changes with each round; one told to leave sends
nothing and exits with code 0). Nothing is unpickled before the launcher
has proven it knows the job's secret (horovod.runner.auth)."""

import os
import socket
import sys

from horovod.runner import auth
from horovod.runner.run_api import MAX_PAYLOAD_BYTES


def main():
    import cloudpickle

    env = os.environ
    addr, port = env["HOROVOD_RUN_ADDR"], int(env["HOROVOD_RUN_PORT"])
    secret = bytes.fromhex(env["HOROVOD_SECRET_KEY"])
    rank = int(env.get("HOROVOD_RANK", env.get("OMPI_COMM_WORLD_RANK", "0")))
    worker = env.get("HOROVOD_ELASTIC_WORKER")
    with socket.create_connection((addr, port), timeout=60) as sock:
        try:
            channel = auth.client_handshake(sock, secret)
            channel.send((worker or str(rank)).encode("ascii"))
            payload = channel.recv(MAX_PAYLOAD_BYTES)
        except (ConnectionError, OSError) as e:
            sys.stderr.write("rank %d: cannot take the function from "
                             "horovod.run's launcher at %s:%d: %s\n"
                             % (rank, addr, port, e))
            return 2
        func, args, kwargs = cloudpickle.loads(payload)
        sock.settimeout(None)
        try:
            outcome = (True, func(*args, **kwargs))
            code = 0
        except SystemExit as e:
            if worker and e.code in (None, 0):
                return 0  # told to leave: the job goes on without it
            outcome, code = (False, e), 1
        except BaseException as e:  # noqa: B902 - handed to the launcher
            outcome = (False, e)
            code = 1
        # The rank this process ended at: an elastic worker's last round.
        rank = int(env.get("HOROVOD_RANK", rank))
        try:
            blob = cloudpickle.dumps(outcome + (rank,))
        except Exception as e:  # an unpicklable result or exception
            outcome = (False, RuntimeError(
                "rank %d: its %s cannot be sent back: %s"
                % (rank, "result" if outcome[0] else "exception", e)))
            blob = cloudpickle.dumps(outcome + (rank,))
            code = 1
        channel.send(blob)
    if code:
        error = outcome[1]
        sys.stderr.write("rank %d raised %s: %s\n"
                         % (rank, type(error).__name__, error))
    return code


if __name__ == "__main__":
    sys.exit(main())
