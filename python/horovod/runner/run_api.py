"""`horovod.run(fn, ...)`: runs a Python function on every rank of a job,
on this host or across hosts, and returns each rank's return value in rank
order.

The launcher serves the function to its ranks and collects their results
over a channel of its own (horovod.runner.auth): each rank proves it knows
the job's secret, and the launcher proves it back, before either end
unpickles anything, and every frame carries an HMAC. Functions and results
are cloudpickled only across that channel.
"""

import socket
import sys
import threading

from horovod.runner import auth
from horovod.runner.probe import address_toward

# A function with its captured state, or one rank's result.
MAX_PAYLOAD_BYTES = 1 << 30


class _Server:
    """Hands out the function and gathers results; one thread per rank.
    `started` holds who took the function, `results` their results,
    `lost` why a connection ended without one; `changed` is notified on
    each."""

    def __init__(self, payload):
        self.payload = payload
        self.results = {}
        self.started = set()
        self.lost = {}
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.secret = None
        self.listener = None

    def start(self, bind_addr, secret):
        self.secret = bytes.fromhex(secret)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((bind_addr, 0))
        self.listener.listen(256)
        auth.serve_connections(self.listener, self._serve)
        return self.listener.getsockname()

    def _serve(self, conn):
        with conn:
            try:
                conn.settimeout(30)
                channel = auth.serve_handshake(conn, self.secret)
                # A rank, or an elastic worker's id (its rank is the one
                # it ends at, sent with its result).
                who = channel.recv(256).decode("ascii")
            except (OSError, ConnectionError, ValueError):
                return
            self._dispatch(who, channel, conn)

    def _dispatch(self, who, channel, conn):
        try:
            channel.send(self.payload)
        except (OSError, ConnectionError):
            return
        self._note(self.started.add, who)
        conn.settimeout(None)  # the function may run for hours
        try:
            result = channel.recv(MAX_PAYLOAD_BYTES)
        except (OSError, ConnectionError, ValueError) as e:
            self._note(self.lost.__setitem__, who, str(e))
            return
        self._note(self.results.__setitem__, who, result)

    def _note(self, update, *args):
        with self.changed:
            update(*args)
            self.changed.notify_all()

    def close(self):
        if self.listener is not None:
            self.listener.close()


def rank_raised(who, rank, error):
    """How every launcher words a rank whose function raised `error`."""
    return "%s: rank %d raised %s: %s" % (who, rank, type(error).__name__,
                                          error)


def first_line(error):
    """An error's first line (a Spark or Ray error carries a whole remote
    traceback)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def outcomes(blobs, successes_only):
    """{rank: (ok, value)} from the ranks' result blobs (cloudpickled (ok,
    value, rank)), the first for each rank. `successes_only`: an elastic
    job that succeeded, whose workers that failed in earlier rounds were
    replaced, so only the values returned count."""
    import cloudpickle

    out = {}
    for blob in blobs:
        ok, value, rank = cloudpickle.loads(blob)
        if ok or not successes_only:
            out.setdefault(rank, (ok, value))
    return out


def cause_first(failures):
    """(rank, exception) pairs, in the order given, with the ranks whose own
    code raised before the ranks whose collectives failed because a peer
    had (HorovodInternalError: a peer raised, died or shut down): the
    first pair is the job's cause."""
    from horovod.common.exceptions import (HorovodInternalError,
                                           HorovodInvalidArgumentError)

    def from_a_peer(error):
        return (isinstance(error, HorovodInternalError) and
                not isinstance(error, HorovodInvalidArgumentError))

    return sorted(failures, key=lambda f: from_a_peer(f[1]))


def job_cause(outcomes_by_rank):
    """(rank, exception) of a failed job's cause, or None: of the ranks that
    raised, the lowest whose own code raised, else the lowest (cause_first
    over them in rank order)."""
    failures = [(r, o[1]) for r, o in sorted(outcomes_by_rank.items())
                if not o[0]]
    return cause_first(failures)[0] if failures else None


def function_payload(caller, func, args, kwargs):
    """What a launcher sends its ranks: func and its arguments,
    cloudpickled, once they are found to be of the right kinds; a
    TypeError from `caller` naming the culprit, before anything starts,
    otherwise."""
    import cloudpickle

    if not callable(func):
        raise TypeError("%s: func must be callable, got %s"
                        % (caller, type(func).__name__))
    if isinstance(args, (str, bytes, dict)) or \
            not hasattr(args, "__iter__"):
        raise TypeError("%s: args must be a tuple or list of func's "
                        "positional arguments, got %s"
                        % (caller, type(args).__name__))
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError("%s: kwargs must be a dict of func's keyword "
                        "arguments, got %s" % (caller, type(kwargs).__name__))
    try:
        return cloudpickle.dumps((func, tuple(args), dict(kwargs or {})))
    except Exception as e:
        raise TypeError("%s: func and its arguments cannot be sent to the "
                        "ranks: %s: %s" % (caller, type(e).__name__, e)) \
            from e


def run(func, args=(), kwargs=None, np=1, min_np=None, max_np=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None,
        hostfile=None, start_timeout=None, ssh_port=None,
        ssh_identity_file=None, disable_cache=None, output_filename=None,
        verbose=None, use_gloo=None, use_mpi=None, mpi_args=None,
        network_interface=None, executable=None):
    """Runs func(*args, **kwargs) on np ranks; returns the list of their
    return values, rank 0's first. Raises ValueError, before any rank
    starts, for settings horovodrun would refuse, and RuntimeError if the
    job fails, naming the rank, with a rank's own exception as its cause.

    With min_np or max_np the job is elastic (horovodrun's elastic mode on
    the hosts given; `slots`, `reset_limit` and `cooldown_range` as its
    --slots-per-host, --reset-limit and --blacklist-cooldown-range): func
    should train through hvd.elastic.run, and the values returned are
    those of the workers of the last round, in its rank order."""
    from horovod.runner import flags, launch

    if hosts is not None and hostfile is not None:
        raise ValueError("give hosts or hostfile, not both")
    for name, value in (("np", np), ("min_np", min_np), ("max_np", max_np),
                        ("slots", slots), ("reset_limit", reset_limit)):
        if value is not None and (isinstance(value, bool) or
                                  not isinstance(value, int)):
            raise ValueError("horovod.run: %s=%r is not an integer"
                             % (name, value))
    payload = function_payload("horovod.run", func, args, kwargs)
    argv = ["-np", str(np)]
    elastic = min_np is not None or max_np is not None
    for flag, value in (("--min-np", min_np), ("--max-np", max_np),
                        ("--slots-per-host", slots),
                        ("--reset-limit", reset_limit)):
        if value is not None:
            argv += [flag, str(value)]
    if cooldown_range is not None:
        low, high = cooldown_range
        argv += ["--blacklist-cooldown-range", str(low), str(high)]
    for flag, value in (("-H", hosts), ("-hostfile", hostfile),
                        ("--start-timeout", start_timeout), ("-p", ssh_port),
                        ("-i", ssh_identity_file),
                        ("--output-filename", output_filename),
                        ("--mpi-args", mpi_args),
                        ("--network-interface", network_interface)):
        if value is not None:
            argv += [flag, str(value)]
    for flag, on in (("--verbose", verbose), ("--gloo", use_gloo),
                     ("--mpi", use_mpi), ("--disable-cache", disable_cache)):
        if on:
            argv.append(flag)
    server = _Server(payload)

    def before_start(addrs, secret):
        bind = ("127.0.0.1" if addrs is None
                else address_toward(next(iter(addrs.values()))))
        host, port = server.start(bind, secret)
        return {"HOROVOD_RUN_ADDR": host, "HOROVOD_RUN_PORT": str(port)}

    command = [executable or sys.executable, "-m", "horovod.runner.run_task"]
    try:
        code = launch.run_command_line(argv + command, before_start)
    except flags.UsageError as e:
        raise ValueError("horovod.run: %s" % e) from None
    finally:
        server.close()
    done = outcomes(server.results.values(), elastic and code == 0)
    failed = job_cause(done)
    if failed:
        rank, error = failed
        raise RuntimeError(rank_raised("horovod.run", rank, error)) \
            from error
    if code != 0:
        raise RuntimeError("horovod.run: the job failed (exit code %d)" % code)
    return in_rank_order(done, len(done) if elastic else np, "horovod.run")


def in_rank_order(outcomes_by_rank, size, who):
    """The values of ranks 0..size-1; RuntimeError naming those missing."""
    missing = [r for r in range(size) if r not in outcomes_by_rank]
    if missing:
        raise RuntimeError("%s: no result from rank(s) %s" % (who, missing))
    return [outcomes_by_rank[r][1] for r in range(size)]
