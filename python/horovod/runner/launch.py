"""horovodrun: starts the ranks of a job and supervises them.

Each rank gets HOROVOD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/CROSS_RANK/CROSS_SIZE/
HOSTNAME, rank 0's controller address, and a fresh per-job secret in its
environment (never on a command line). Output lines are prefixed
``[rank]<stdout>:`` / ``[rank]<stderr>:``. Ctrl-C and SIGTERM reach every rank
and its children; when a rank fails the job stops and the exit names it.
"""

import argparse
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

import horovod

_LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


def _parse_hosts(spec, np):
    if not spec:
        return [("localhost", np)]
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, slots = item.partition(":")
        hosts.append((name, int(slots) if slots else 1))
    return hosts


def _is_local(host):
    return host in _LOCAL_NAMES or host in (socket.gethostname(),
                                           socket.getfqdn())


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """Runs in each child before exec: its own process group (so signals
    reach its children too) and SIGKILL if the launcher dies."""
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def check_build(out=sys.stdout):
    def mark(b):
        return "X" if b else " "
    try:
        import torch  # noqa: F401
        has_torch = True
    except Exception:
        has_torch = False
    try:
        from horovod import _core  # noqa: F401
        engine = True
    except Exception:
        engine = False
    out.write(
        "Horovod v%s:\n\n"
        "Available Frameworks:\n"
        "    [ ] TensorFlow\n"
        "    [%s] PyTorch\n"
        "    [ ] MXNet\n\n"
        "Available Controllers:\n"
        "    [ ] MPI\n"
        "    [ ] Gloo\n"
        "    [%s] TCP (native)\n\n"
        "Available Tensor Operations:\n"
        "    [ ] NCCL\n"
        "    [ ] DDL\n"
        "    [ ] CCL\n"
        "    [ ] MPI\n"
        "    [ ] Gloo\n"
        "    [%s] CPU (native ring/recursive doubling over TCP)\n"
        % (horovod.__version__, mark(has_torch and engine), mark(engine),
           mark(engine)))


class _Job:
    def __init__(self, command, env_base, hosts, np, verbose):
        self.command = command
        self.procs = []
        self.lock = threading.Lock()
        self.stopping = False
        self.verbose = verbose
        port = _free_port()
        secret = secrets.token_hex(32)
        rank = 0
        local_sizes = []
        for _, slots in hosts:
            local_sizes.append(min(slots, np - sum(local_sizes)))
        self.envs = []
        for cross_rank, n_local in enumerate(local_sizes):
            for local_rank in range(n_local):
                env = dict(env_base)
                env.update({
                    "HOROVOD_RANK": str(rank),
                    "HOROVOD_SIZE": str(np),
                    "HOROVOD_LOCAL_RANK": str(local_rank),
                    "HOROVOD_LOCAL_SIZE": str(n_local),
                    "HOROVOD_CROSS_RANK": str(cross_rank),
                    "HOROVOD_CROSS_SIZE": str(len(local_sizes)),
                    "HOROVOD_HOSTNAME": hosts[cross_rank][0],
                    "HOROVOD_CONTROLLER_ADDR": "127.0.0.1",
                    "HOROVOD_CONTROLLER_PORT": str(port),
                    "HOROVOD_SECRET_KEY": secret,
                    "PYTHONUNBUFFERED": "1",
                })
                self.envs.append(env)
                rank += 1

    def _pump(self, stream, rank, kind, sink):
        prefix = ("[%d]<%s>:" % (rank, kind)).encode()
        for line in iter(stream.readline, b""):
            with self.lock:
                sink.buffer.write(prefix + line if line.endswith(b"\n")
                                  else prefix + line + b"\n")
                sink.buffer.flush()
        stream.close()

    def start(self):
        self.pumps = []
        for rank, env in enumerate(self.envs):
            if self.verbose:
                sys.stderr.write("horovodrun: starting rank %d: %s\n"
                                 % (rank, " ".join(self.command)))
            p = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 preexec_fn=_die_with_parent)
            self.procs.append(p)
            for stream, kind, sink in ((p.stdout, "stdout", sys.stdout),
                                       (p.stderr, "stderr", sys.stderr)):
                t = threading.Thread(target=self._pump,
                                     args=(stream, rank, kind, sink), daemon=True)
                t.start()
                self.pumps.append(t)

    def signal_all(self, sig):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def stop(self, grace_s=5.0):
        self.stopping = True
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(p.poll() is None
                                                  for p in self.procs):
            time.sleep(0.05)
        self.signal_all(signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def wait(self):
        """Returns (exit code, failed rank or None)."""
        while True:
            codes = [p.poll() for p in self.procs]
            for rank, code in enumerate(codes):
                if code not in (None, 0):
                    return code, rank
            if all(c == 0 for c in codes):
                return 0, None
            time.sleep(0.05)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="horovodrun",
        description="Launch a Horovod job on this machine.")
    parser.add_argument("-v", "--version", action="store_true",
                        help="print the version and exit")
    parser.add_argument("-np", "--num-proc", dest="np", type=int,
                        help="number of ranks to start")
    parser.add_argument("-H", "--hosts", dest="hosts",
                        help="hosts and slots, e.g. localhost:4")
    parser.add_argument("--start-timeout", type=float, default=None,
                        help="seconds the ranks have to find each other "
                             "(default 30, or HOROVOD_START_TIMEOUT)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("-cb", "--check-build", action="store_true",
                        help="print the frameworks and operations built in")
    parser.add_argument("--disable-cache", action="store_true",
                        help="accepted for compatibility; no effect")
    parser.add_argument("-p", "--ssh-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--fusion-threshold-mb", type=float, default=None)
    parser.add_argument("--cycle-time-ms", type=float, default=None)
    parser.add_argument("--cache-capacity", type=int, default=None)
    parser.add_argument("--hierarchical-allreduce", dest="hierarchical",
                        action="store_const", const="1", default=None,
                        help="allreduce within hosts, then across them "
                             "(the default for jobs spanning hosts)")
    parser.add_argument("--no-hierarchical-allreduce", dest="hierarchical",
                        action="store_const", const="0",
                        help="one flat ring over every rank instead")
    parser.add_argument("--timeline-filename", default=None,
                        help="record a Chrome trace of rank 0's activity here")
    parser.add_argument("--timeline-mark-cycles", action="store_true",
                        help="mark each background loop cycle in the timeline")
    parser.add_argument("--autotune", action="store_true",
                        help="let rank 0 tune fusion threshold, cycle time and "
                             "the small-allreduce crossover")
    parser.add_argument("--autotune-log-file", default=None)
    parser.add_argument("--autotune-warmup-samples", type=int, default=None)
    parser.add_argument("--autotune-steps-per-sample", type=int, default=None)
    parser.add_argument("--autotune-bayes-opt-max-samples", type=int,
                        default=None)
    parser.add_argument("--autotune-gaussian-process-noise", type=float,
                        default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print(horovod.__version__)
        return 0
    if args.check_build:
        check_build()
        return 0
    if not args.command:
        sys.stderr.write("horovodrun: no command to run\n")
        return 2
    if args.np is None or args.np < 1:
        sys.stderr.write("horovodrun: -np must be a positive number of ranks\n")
        return 2
    hosts = _parse_hosts(args.hosts, args.np)
    remote = [h for h, _ in hosts if not _is_local(h)]
    if remote:
        sys.stderr.write("horovodrun: remote hosts are not supported by this "
                         "launcher yet: %s\n" % ", ".join(remote))
        return 2
    if sum(s for _, s in hosts) < args.np:
        sys.stderr.write("horovodrun: -np %d exceeds the %d slots in -H %s\n"
                         % (args.np, sum(s for _, s in hosts), args.hosts))
        return 2
    env = dict(os.environ)
    if args.start_timeout is not None:
        env["HOROVOD_START_TIMEOUT"] = str(args.start_timeout)
    if args.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * 1024 * 1024))
    if args.cycle_time_ms is not None:
        env["HOROVOD_CYCLE_TIME"] = str(args.cycle_time_ms)
    if args.cache_capacity is not None:
        env["HOROVOD_CACHE_CAPACITY"] = str(args.cache_capacity)
    if args.hierarchical is not None:
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = args.hierarchical
    if args.timeline_filename is not None:
        env["HOROVOD_TIMELINE"] = os.path.abspath(args.timeline_filename)
    if args.timeline_mark_cycles:
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
    if args.autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
    for flag, var in (("autotune_log_file", "HOROVOD_AUTOTUNE_LOG"),
                      ("autotune_warmup_samples",
                       "HOROVOD_AUTOTUNE_WARMUP_SAMPLES"),
                      ("autotune_steps_per_sample",
                       "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"),
                      ("autotune_bayes_opt_max_samples",
                       "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"),
                      ("autotune_gaussian_process_noise",
                       "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE")):
        value = getattr(args, flag)
        if value is not None:
            env[var] = (os.path.abspath(value) if var == "HOROVOD_AUTOTUNE_LOG"
                        else str(value))
    job = _Job(args.command, env, hosts, args.np, args.verbose)

    def forward(signum, _frame):
        job.signal_all(signum)
        if signum == signal.SIGINT:
            job.stopping = True

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    job.start()
    code, failed = job.wait()
    if failed is not None:
        if not job.stopping:
            sys.stderr.write("horovodrun: rank %d exited with code %d; stopping "
                             "the other ranks\n" % (failed, code))
        job.stop()
    for t in job.pumps:
        t.join(timeout=2)
    if failed is not None:
        sys.stderr.write("horovodrun: job failed: rank %d exited with code %d\n"
                         % (failed, code))
        return code if code > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
