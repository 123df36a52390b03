"""`horovod.spark.run`: runs a function as a Horovod job on Spark's
executors and returns each rank's return value, in rank order.

The job is one Spark barrier stage of `num_proc` tasks, so all ranks start
together or none does (horovod.spark.task is the executor's side). The
driver serves the function to the ranks and gathers their results and
output over horovod.runner.auth's channel: each end proves it knows the
job's secret before anything is read, and only then are the function and
results (cloudpickled) exchanged. The driver watches the ranks, not only
Spark: a rank that raises, or whose process ends without a result (its
executor died), fails the run at once with that rank's error, and the
driver cancels the Spark job, which kills the other ranks.

Thread-safety: one call of `run` per thread; each call has its own job
group, service and threads.
"""

import functools
import os
import secrets
import socket
import sys
import threading
import time
import uuid

from horovod.runner import flags, run_api
from horovod.runner.output import Output
from horovod.spark.task import MAX_OUTPUT_FRAME, run_rank

_DEFAULT_START_TIMEOUT_S = 600.0
# After the first failure, how long other ranks' reports may still arrive
# before the run fails: a rank whose process died is the cause, and the
# errors its peers raise about it may come first.
_SETTLE_S = 1.0
# Once every result is in, how long the Spark job may take to finish.
_FINISH_S = 30.0


class _TextSink:
    """A text stream (io.StringIO, a notebook's) as the byte sink Output
    writes to."""

    def __init__(self, stream):
        self._stream = stream
        self.buffer = self

    def write(self, data):
        self._stream.write(data.decode("utf-8", "replace"))

    def flush(self):
        self._stream.flush()

    def isatty(self):
        return False


def byte_sink(stream):
    return stream if hasattr(stream, "buffer") else _TextSink(stream)


class RunService(run_api._Server):
    """horovod.run's server plus the ranks' output: a connection that
    names itself "output <label>" carries the stdout and stderr of the
    rank so labelled."""

    def __init__(self, payload, output, stdout, stderr):
        super().__init__(payload)
        self._output = output
        self._sinks = {b"o": ("stdout", stdout), b"e": ("stderr", stderr)}
        self.pumps = []

    def _dispatch(self, who, channel, conn):
        if not who.startswith("output "):
            return super()._dispatch(who, channel, conn)
        label = who.split(" ", 1)[1]
        pipes = {}
        for kind, (name, sink) in self._sinks.items():
            r, w = os.pipe()
            pipes[kind] = w
            t = threading.Thread(target=self._output.pump,
                                 args=(os.fdopen(r, "rb"), label, name, sink),
                                 daemon=True)
            t.start()
            with self.lock:
                self.pumps.append(t)
        conn.settimeout(None)
        try:
            while True:
                frame = channel.recv(MAX_OUTPUT_FRAME + 1)
                fd = pipes.get(frame[:1])
                if fd is None:
                    break
                view = memoryview(frame)[1:]
                while view:
                    view = view[os.write(fd, view):]
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            for fd in pipes.values():
                os.close(fd)


def active_context(who):
    """The active SparkContext, or ValueError naming `who`."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        raise ValueError("%s needs an active SparkContext (start a "
                         "SparkSession first)" % who)
    return sc


def spark_error(error):
    """The line of a Spark job's error that says what went wrong: Py4J
    puts "An error occurred while calling ..." first, then ": " and the
    JVM's exception."""
    for line in str(error).strip().splitlines():
        line = line.strip().lstrip(": ").strip()
        if line and not line.startswith("An error occurred while calling"):
            return line
    return run_api.first_line(error)


def timeout_or_default(given, argument, variable, default, caller):
    """`given`, or the variable's value, or `default`: a positive number of
    seconds, or a ValueError from `caller` naming where it came from."""
    try:
        return flags.seconds(given, argument, variable, default)
    except flags.UsageError as e:
        raise ValueError("%s: %s" % (caller, e)) from None


def start_timeout_or_default(start_timeout, caller="horovod.spark.run"):
    """`start_timeout`, or HOROVOD_SPARK_START_TIMEOUT, or 600 s."""
    return timeout_or_default(start_timeout, "start_timeout",
                              "HOROVOD_SPARK_START_TIMEOUT",
                              _DEFAULT_START_TIMEOUT_S, caller)


def driver_address(sc):
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None,
        use_mpi=None, use_gloo=None, extra_mpi_args=None, env=None,
        stdout=None, stderr=None, verbose=1, nics=None,
        prefix_output_with_timestamp=False, executable=None):
    """Runs fn(*args, **kwargs) on `num_proc` ranks, each in a Spark task
    of one barrier stage (default: the context's default parallelism), and
    returns their return values, rank 0's first.

    start_timeout: seconds for every task to start (default 600, or
    HOROVOD_SPARK_START_TIMEOUT); a barrier stage needs `num_proc` task
    slots free at once. env: variables added to the ranks' environment.
    stdout/stderr: where the ranks' output goes, each line prefixed with
    its rank (default this process's). nics: interface names the ranks
    may listen on. executable: the Python the ranks run (default the
    executors'). use_gloo is accepted (the ranks use the engine's own
    transport); use_mpi and extra_mpi_args are refused: Spark tasks are
    not started by mpirun.

    Raises RuntimeError naming the rank when a rank raises (its exception
    is the cause) or dies, or when the Spark job fails; TimeoutError when
    the tasks do not all start within start_timeout."""
    sc = active_context("horovod.spark.run")
    if use_mpi:
        raise ValueError("horovod.spark.run: use_mpi=True is not supported: "
                         "the ranks run in Spark tasks and use Horovod's own "
                         "transport, not mpirun")
    if extra_mpi_args:
        raise ValueError("horovod.spark.run: extra_mpi_args=%r is not "
                         "supported: the ranks are not started by mpirun"
                         % (extra_mpi_args,))
    if num_proc is None:
        num_proc = sc.defaultParallelism
    if not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError("horovod.spark.run: num_proc=%r is not a positive "
                         "integer" % (num_proc,))
    start_timeout = start_timeout_or_default(start_timeout)
    if isinstance(nics, str):
        nics = [nics]
    output = Output(size=num_proc, timestamps=prefix_output_with_timestamp)
    service = RunService(
        run_api.function_payload("horovod.spark.run", fn, args, kwargs), output,
        byte_sink(stdout or sys.stdout), byte_sink(stderr or sys.stderr))
    secret = secrets.token_hex(32)
    addr, port = service.start(driver_address(sc), secret)
    job = {"secret": secret, "driver_addr": addr, "driver_port": port,
           "env": {str(k): str(v) for k, v in (env or {}).items()},
           "executable": executable, "nics": list(nics or [])}
    group = "horovod.spark.run-" + uuid.uuid4().hex
    spark_job = SparkJob(sc, group, "horovod.spark.run", num_proc,
                         functools.partial(run_rank, job), barrier=True)
    started_at = time.monotonic()
    try:
        spark_job.start()
        results = _wait(service, spark_job, num_proc, start_timeout,
                        started_at, sc, verbose)
    finally:
        spark_job.cancel()
        service.close()
        for t in list(service.pumps):
            t.join(5.0)
    return results


class SparkJob:
    """One stage of `num_tasks` tasks, each running `task` (a function of
    its partition's rows), collected on a thread of its own (Spark's job
    group is per thread) so the driver can watch the ranks meanwhile.
    `codes`: what the tasks yielded, as a dict."""

    def __init__(self, sc, group, description, num_tasks, task, barrier):
        self._sc = sc
        self._group = group
        self._description = description
        self._num_tasks = num_tasks
        self._task = task
        self._barrier = barrier
        self.error = None
        self.codes = None
        self.done = threading.Event()
        self._cancelled = False

    def start(self):
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        try:
            self._sc.setJobGroup(self._group, self._description,
                                 interruptOnCancel=True)
            rdd = self._sc.parallelize(range(self._num_tasks),
                                       self._num_tasks)
            if self._barrier:
                rdd = rdd.barrier()
            self.codes = dict(rdd.mapPartitions(self._task).collect())
        except Exception as e:  # noqa: B902 - reported by the driver
            self.error = e
        finally:
            self.done.set()

    def cancel(self):
        if not self.done.is_set() and not self._cancelled:
            self._cancelled = True
            self._sc.cancelJobGroup(self._group)
        self.done.wait(_FINISH_S)


def _wait(service, spark_job, num_proc, start_timeout, started_at, sc,
          verbose):
    import cloudpickle

    first_failure = None
    announced = False
    decoded = {}
    while True:
        with service.changed:
            service.changed.wait(0.1)
            results = dict(service.results)
            started = len(service.started)
            lost = dict(service.lost)
        now = time.monotonic()
        if verbose >= 2 and not announced and started == num_proc:
            announced = True
            sys.stderr.write("horovod.spark.run: %d ranks started in %.2fs\n"
                             % (num_proc, now - started_at))
        for who, blob in results.items():
            if who not in decoded:
                decoded[who] = cloudpickle.loads(blob)
        # In the order they arrived: the first rank to fail is the cause,
        # unless it failed only because a peer had (cause_first).
        outcomes = {rank: (ok, value) for ok, value, rank in decoded.values()}
        failed = [(r, o[1]) for r, o in outcomes.items() if not o[0]]
        if (failed or lost) and first_failure is None:
            first_failure = now
        if first_failure is not None and (now - first_failure >= _SETTLE_S
                                          or spark_job.done.is_set()):
            if lost:
                who = next(iter(lost))
                raise RuntimeError(
                    "horovod.spark.run: rank %s ended without a result (its "
                    "process or executor died: %s)" % (who, lost[who]))
            rank, error = run_api.cause_first(failed)[0]
            raise RuntimeError(run_api.rank_raised(
                "horovod.spark.run", rank, error)) from error
        if len(outcomes) == num_proc and first_failure is None:
            spark_job.done.wait(_FINISH_S)
            return [outcomes[r][1] for r in range(num_proc)]
        if spark_job.done.is_set() and first_failure is None:
            if spark_job.error is not None:
                raise RuntimeError("horovod.spark.run: the Spark job failed: "
                                   "%s" % spark_error(spark_job.error)) \
                    from spark_job.error
            missing = [r for r in range(num_proc) if r not in outcomes]
            codes = spark_job.codes or {}
            raise RuntimeError(
                "horovod.spark.run: no result from rank(s) %s (exit codes %s)"
                % (missing, [codes.get(r) for r in missing]))
        if started < num_proc and now - started_at > start_timeout:
            raise TimeoutError(
                "horovod.spark.run: %d of %d tasks started within "
                "start_timeout=%gs; a barrier stage needs %d task slots at "
                "once and this Spark application has %d"
                % (started, num_proc, start_timeout, num_proc,
                   sc.defaultParallelism))

