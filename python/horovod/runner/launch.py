"""horovodrun: starts the ranks of a job, on this host and over ssh on
others, and supervises them.

Each rank gets HOROVOD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/CROSS_RANK/CROSS_SIZE/
HOSTNAME, rank 0's controller address, its own listening address when the
job spans hosts, and a fresh per-job secret in its environment (never on a
command line; remote ranks receive it on standard input, see remote.py).
Output lines are prefixed ``[rank]<stdout>:`` / ``[rank]<stderr>:``. Ctrl-C
and SIGTERM reach every rank and its children on every host; when a rank
fails the job stops and the exit names it. Before remote ranks start, every
host is checked and a common network interface chosen (hosts.py).
"""

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

import horovod
from horovod.runner import config_file, mpi_run
from horovod.runner.hosts import (LaunchError, SshSettings, die_with_parent,
                                  find_addresses, is_local)
from horovod.runner.output import Output

# After Ctrl-C, ranks get this long to exit on SIGINT before SIGTERM, and
# as long again before SIGKILL.
_INT_GRACE_S = 5.0
_TERM_GRACE_S = 5.0


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


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _importable(module):
    """Whether `module` is installed, found without importing it (importing
    TensorFlow takes seconds)."""
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_build(out=sys.stdout):
    def mark(b):
        return "X" if b else " "
    try:
        from horovod import _core  # noqa: F401
        engine = True
    except Exception:
        engine = False
    frameworks = [("TensorFlow", "tensorflow"), ("PyTorch", "torch"),
                  ("Keras", "keras"), ("JAX", "jax")]
    lines = "".join("    [%s] %s\n" % (mark(engine and _importable(m)), name)
                    for name, m in frameworks)
    out.write(
        "Horovod v%s:\n\n"
        "Available Frameworks:\n"
        "%s"
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
        % (horovod.__version__, lines, mark(engine), mark(engine)))


# Variables that describe the launcher's own host or session; a remote rank
# gets its host's own.
_HOST_SPECIFIC = {"HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "TERM",
                  "DISPLAY", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
                  "SSH_AUTH_SOCK", "SSH_AGENT_PID", "TMUX", "TMUX_PANE",
                  "XDG_RUNTIME_DIR", "XDG_SESSION_ID", "MAIL", "LS_COLORS"}


class _Rank:
    """One rank: where it runs and how it is started. A remote rank's
    command is ssh running the launcher's agent (horovod.runner.remote),
    which receives `header` (the rank's environment and command) on its
    standard input."""

    def __init__(self, rank, host, env, command, ssh):
        self.rank = rank
        self.host = host
        self.proc = None
        if is_local(host):
            self.argv, self.env, self.header = list(command), env, None
        else:
            agent = [sys.executable, "-m", "horovod.runner.remote"]
            self.argv = ssh.argv(host, agent)
            self.env = None  # ssh itself runs in the launcher's environment
            self.header = {"cwd": os.getcwd(), "command": list(command),
                           "env": {k: v for k, v in env.items()
                                   if k not in _HOST_SPECIFIC}}

    def start(self):
        self.proc = subprocess.Popen(
            self.argv, env=self.env,
            stdin=subprocess.DEVNULL if self.header is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=die_with_parent)
        if self.header is not None:
            self._tell(json.dumps(self.header))

    def _tell(self, line):
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def signal(self, sig):
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.header is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            return
        name = {signal.SIGINT: "INT", signal.SIGTERM: "TERM"}.get(sig, "KILL")
        self._tell(name)
        if sig == signal.SIGKILL:
            # The agent kills the rank when its input ends; ssh goes too.
            try:
                self.proc.stdin.close()
            except OSError:
                pass


def placement(hosts, np):
    """(host, local_rank, local_size, cross_rank, cross_size) per rank: ranks
    fill the hosts in the order given, each up to its slots."""
    local_sizes = []
    for _, slots in hosts:
        if sum(local_sizes) >= np:
            break
        local_sizes.append(min(slots, np - sum(local_sizes)))
    out = []
    for cross_rank, n_local in enumerate(local_sizes):
        for local_rank in range(n_local):
            out.append((hosts[cross_rank][0], local_rank, n_local, cross_rank,
                        len(local_sizes)))
    return out


def start_pumps(r, output):
    """Threads forwarding a started rank's output; returns them."""
    pumps = []
    for stream, kind, sink in ((r.proc.stdout, "stdout", sys.stdout),
                               (r.proc.stderr, "stderr", sys.stderr)):
        t = threading.Thread(target=output.pump,
                             args=(stream, r.rank, kind, sink), daemon=True)
        t.start()
        pumps.append(t)
    return pumps


def stop_ranks(ranks, grace_s=_TERM_GRACE_S, interrupts=()):
    """SIGTERM to every rank (a _Rank), then SIGKILL after grace_s (or at a
    third Ctrl-C); returns once each has exited."""
    for r in ranks:
        r.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    pressed = len(interrupts)
    while time.monotonic() < deadline and any(r.proc.poll() is None
                                              for r in ranks):
        if pressed and len(interrupts) > max(pressed, 2):
            break
        time.sleep(0.05)
    for r in ranks:
        r.signal(signal.SIGKILL)
    for r in ranks:
        try:
            r.proc.wait(_TERM_GRACE_S if r.header is not None else None)
        except subprocess.TimeoutExpired:
            r.proc.kill()  # ssh that outlived its agent's answer
            r.proc.wait()


class _Job:
    def __init__(self, command, env_base, hosts, np, verbose, network=None,
                 ssh=None, output=None):
        """`network`: None on one host; else (address per host name, the
        controller port on the first host)."""
        self.command = command
        self.stopping = False
        self.verbose = verbose
        self.output = output or Output()
        secret = env_base.get("HOROVOD_SECRET_KEY") or secrets.token_hex(32)
        if network is None:
            addrs, port = None, _free_port()
        else:
            addrs, port = network
        self.ranks = []
        first_host = placement(hosts, np)[0][0]
        for rank, (host, local_rank, local_size, cross_rank, cross_size) in \
                enumerate(placement(hosts, np)):
            env = dict(env_base)
            env.update({
                "HOROVOD_RANK": str(rank),
                "HOROVOD_SIZE": str(np),
                "HOROVOD_LOCAL_RANK": str(local_rank),
                "HOROVOD_LOCAL_SIZE": str(local_size),
                "HOROVOD_CROSS_RANK": str(cross_rank),
                "HOROVOD_CROSS_SIZE": str(cross_size),
                "HOROVOD_HOSTNAME": host,
                "HOROVOD_CONTROLLER_ADDR":
                    "127.0.0.1" if addrs is None else addrs[first_host],
                "HOROVOD_CONTROLLER_PORT": str(port),
                "HOROVOD_SECRET_KEY": secret,
                "PYTHONUNBUFFERED": "1",
            })
            if addrs is not None:
                env["HOROVOD_BIND_ADDR"] = addrs[host]
            self.ranks.append(_Rank(rank, host, env, command, ssh))

    @property
    def procs(self):
        return [r.proc for r in self.ranks]

    def start(self):
        self.pumps = []
        for r in self.ranks:
            if self.verbose:
                sys.stderr.write("horovodrun: starting rank %d on %s: %s\n"
                                 % (r.rank, r.host, " ".join(self.command)))
            r.start()
            self.pumps += start_pumps(r, self.output)

    def signal_all(self, sig):
        for r in self.ranks:
            r.signal(sig)

    def stop(self, grace_s=5.0, interrupts=()):
        self.stopping = True
        stop_ranks(self.ranks, grace_s, interrupts)

    def wait(self, interrupts=()):
        """Returns (exit code, failed rank or None). After a Ctrl-C it also
        returns once the ranks have had _INT_GRACE_S to stop by themselves,
        or at once on a second Ctrl-C."""
        while True:
            codes = [p.poll() for p in self.procs]
            if interrupts and (len(interrupts) > 1 or
                               time.monotonic() - interrupts[0] > _INT_GRACE_S
                               or all(c is not None for c in codes)):
                return next((c for c in codes if c), 0), None
            if not interrupts:
                for rank, code in enumerate(codes):
                    if code not in (None, 0):
                        return code, rank
                if all(c == 0 for c in codes):
                    return 0, None
            time.sleep(0.05)


# Upstream flags this build does not provide: (values they take, why).
_UNSUPPORTED = {
    "--jsrun": (0, "jsrun (LSF) launching is not built"),
    "--mpi-threads-disable": (0, "there is no MPI controller in this build"),
    "--binding-args": (1, "there is no MPI controller in this build"),
    "--num-nccl-streams": (1, "this build has no NCCL (CPU engine)"),
    "--thread-affinity": (1, "thread affinity is not built"),
    "--gloo-timeout-seconds": (1, "there is no Gloo controller in this build"),
}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line instead of a usage dump."""

    def error(self, message):
        raise _UsageError("%s (see horovodrun --help)" % message)


def parse_args(argv):
    return make_parser().parse_args(argv)


def make_parser():
    parser = _Parser(
        prog="horovodrun",
        description="Launch a Horovod job on this machine or, over ssh, "
                    "across hosts.")
    for flag, (nargs, _) in _UNSUPPORTED.items():
        dest = "unsupported_" + flag.lstrip("-").replace("-", "_")
        if nargs == 0:
            parser.add_argument(flag, dest=dest, action="store_true",
                                help=argparse.SUPPRESS)
        else:
            parser.add_argument(flag, dest=dest, nargs=nargs,
                                help=argparse.SUPPRESS)
    parser.add_argument("-v", "--version", action="store_true",
                        help="print the version and exit")
    parser.add_argument("-np", "--num-proc", dest="np", type=int,
                        help="number of ranks to start")
    parser.add_argument("-H", "--hosts", dest="hosts",
                        help="hosts and slots, e.g. localhost:4")
    parser.add_argument("-hostfile", "--hostfile", dest="hostfile",
                        help="a file of 'host slots=N' lines")
    parser.add_argument("--tcp", action="store_true",
                        help="accepted for compatibility: data always "
                             "travels over TCP or shared memory")
    parser.add_argument("--no-stall-check", action="store_true",
                        help="do not warn about or stop stalled tensors")
    parser.add_argument("--stall-check-warning-time-seconds", type=float,
                        default=None)
    parser.add_argument("--stall-check-shutdown-time-seconds", type=float,
                        default=None)
    parser.add_argument("--start-timeout", type=float, default=None,
                        help="seconds the ranks have to find each other "
                             "(default 30, or HOROVOD_START_TIMEOUT)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--config-file",
                        help="YAML file of tuning, timeline, stall-check and "
                             "logging settings (flags given here win)")
    parser.add_argument("--gloo", action="store_true",
                        help="accepted: ranks always use this engine's own "
                             "TCP and shared-memory transport")
    parser.add_argument("--mpi", action="store_true",
                        help="start the ranks through OpenMPI's mpirun")
    parser.add_argument("--mpi-args",
                        help="extra arguments for mpirun (with --mpi)")
    parser.add_argument("--output-filename",
                        help="also write each rank's output to "
                             "FOLDER/rank.N/stdout and stderr")
    parser.add_argument("--prefix-output-with-timestamp", action="store_true",
                        help="start each output line with the time it arrived")
    parser.add_argument("--log-level",
                        help="engine log level: TRACE, DEBUG, INFO, WARNING, "
                             "ERROR or FATAL")
    parser.add_argument("--log-hide-timestamp", "--log-without-timestamp",
                        dest="log_hide_timestamp", action="store_true",
                        help="engine log lines without their time")
    parser.add_argument("-cb", "--check-build", action="store_true",
                        help="print the frameworks and operations built in")
    parser.add_argument("--disable-cache", action="store_true",
                        help="accepted for compatibility; no effect")
    parser.add_argument("-p", "--ssh-port", type=int,
                        help="ssh port on the remote hosts")
    parser.add_argument("-i", "--ssh-identity-file",
                        help="ssh key file for the remote hosts")
    parser.add_argument("--network-interface", "--network-interfaces",
                        dest="network_interfaces",
                        help="comma-separated interface names the ranks may "
                             "use between hosts (default: one every host "
                             "reaches the others on)")
    parser.add_argument("--fusion-threshold-mb", type=float, default=None)
    parser.add_argument("--cycle-time-ms", type=float, default=None)
    parser.add_argument("--cache-capacity", type=int, default=None)
    parser.add_argument("--hierarchical-allreduce", dest="hierarchical",
                        action="store_const", const="1", default=None,
                        help="allreduce within hosts, then across them "
                             "(the default for jobs spanning hosts)")
    parser.add_argument("--hierarchical-allgather", dest="hierarchical_gather",
                        action="store_const", const="1", default=None,
                        help="allgather, broadcast and alltoall within hosts, "
                             "then across them (the default across hosts)")
    parser.add_argument("--no-hierarchical-allgather",
                        dest="hierarchical_gather", action="store_const",
                        const="0", help="those collectives flat instead")
    parser.add_argument("--no-hierarchical-allreduce", dest="hierarchical",
                        action="store_const", const="0",
                        help="one flat ring over every rank instead")
    parser.add_argument("--data-mac", action="store_true",
                        help="every message on the TCP links between ranks "
                             "carries a MAC (costs CPU time per byte)")
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
    elastic = parser.add_argument_group(
        "elastic mode", "keep training while hosts come and go (any of "
        "--host-discovery-script, --min-np, --max-np turns it on)")
    elastic.add_argument("--min-np", type=int, default=None,
                         help="fewest workers training goes on with "
                              "(default -np)")
    elastic.add_argument("--max-np", type=int, default=None,
                         help="most workers to start (default: every slot)")
    elastic.add_argument("--slots-per-host", "--slots", dest="slots_per_host",
                         type=int, default=None,
                         help="slots of a discovered host that names none")
    elastic.add_argument("--host-discovery-script", default=None,
                         help="executable printing the usable hosts as "
                              "host:slots lines; run every second")
    elastic.add_argument("--elastic-timeout", type=float, default=None,
                         help="seconds a round may take to form (default "
                              "600, or HOROVOD_ELASTIC_TIMEOUT)")
    elastic.add_argument("--reset-limit", type=int, default=None,
                         help="most times the job may re-form")
    elastic.add_argument("--blacklist-cooldown-range", type=float, nargs=2,
                         metavar=("MIN", "MAX"), default=None,
                         help="a failed host comes back after MIN seconds, "
                              "doubling with each failure up to MAX "
                              "(default: never)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def _hosts_from_file(path):
    """'host slots=N' (or 'host:N', or 'host') per line; # comments."""
    hosts = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, *rest = line.split()
            slots = 1
            for item in rest:
                if item.startswith("slots="):
                    slots = int(item[len("slots="):])
            if ":" in name:
                name, _, n = name.partition(":")
                slots = int(n)
            hosts.append("%s:%d" % (name, slots))
    return ",".join(hosts)


def knob_env(args):
    """The HOROVOD_* variables horovodrun's tuning flags set (the knob table,
    src/common/knobs.cc, names the flag of each)."""
    env = {}
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
    if args.hierarchical_gather is not None:
        env["HOROVOD_HIERARCHICAL_ALLGATHER"] = args.hierarchical_gather
    if args.data_mac:
        env["HOROVOD_DATA_MAC"] = "1"
    if getattr(args, "elastic_timeout", None) is not None:
        env["HOROVOD_ELASTIC_TIMEOUT"] = str(args.elastic_timeout)
    if args.log_level is not None:
        env["HOROVOD_LOG_LEVEL"] = args.log_level
    if args.log_hide_timestamp:
        env["HOROVOD_LOG_HIDE_TIME"] = "1"
    if args.timeline_filename is not None:
        env["HOROVOD_TIMELINE"] = os.path.abspath(args.timeline_filename)
    if args.timeline_mark_cycles:
        env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
    if args.autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
    if args.no_stall_check:
        env["HOROVOD_STALL_CHECK_DISABLE"] = "1"
    if args.stall_check_warning_time_seconds is not None:
        env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(
            args.stall_check_warning_time_seconds)
    if args.stall_check_shutdown_time_seconds is not None:
        env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = str(
            args.stall_check_shutdown_time_seconds)
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
    return env


def _run_through_mpirun(args, env, hosts, iface):
    """mpirun places the ranks itself, so rank 0's host is its choice: the
    ranks find rank 0 through OpenMPI's PMIx server (or a private file on
    one host), not through an address horovodrun would have to guess."""
    if args.output_filename:
        sys.stderr.write("horovodrun: --output-filename is not supported with "
                         "--mpi (use mpirun's --output-filename in "
                         "--mpi-args)\n")
        return 2
    slots = []
    for host, _, local_size, _, _ in placement(hosts, args.np):
        if not slots or slots[-1][0] != host:
            slots.append((host, local_size))
    env = dict(env, PYTHONUNBUFFERED="1")
    try:
        argv = mpi_run.mpirun_command(args.command, env, slots, iface,
                                      args.mpi_args)
    except LaunchError as e:
        sys.stderr.write("horovodrun: %s\n" % e)
        return 2
    code = mpi_run.run(argv, env, args.verbose)
    if code != 0:
        sys.stderr.write("horovodrun: mpirun exited with code %d\n" % code)
    return code


def _launch_settings(args):
    """What every way of starting ranks needs: their environment (the
    tuning flags' variables and a fresh job secret added), the start
    timeout, the ssh settings and the forced network interfaces."""
    env = dict(os.environ)
    env.update(knob_env(args))
    env["HOROVOD_SECRET_KEY"] = secrets.token_hex(32)
    timeout_s = (args.start_timeout if args.start_timeout is not None else
                 float(os.environ.get("HOROVOD_START_TIMEOUT", 30)))
    ssh = SshSettings(args.ssh_port, args.ssh_identity_file, timeout_s)
    forced = [i.strip() for i in (args.network_interfaces or "").split(",")
              if i.strip()]
    return env, timeout_s, ssh, forced


def _is_elastic(args):
    return (args.host_discovery_script is not None or args.min_np is not None
            or args.max_np is not None)


def _elastic_sizes(args):
    """(np, min_np, max_np), or raises _UsageError."""
    np = args.np if args.np is not None else args.min_np
    if np is None:
        raise _UsageError("elastic mode needs -np or --min-np")
    min_np = args.min_np if args.min_np is not None else np
    max_np = args.max_np
    if min_np < 1:
        raise _UsageError("--min-np must be at least 1, not %d" % min_np)
    if np < min_np:
        raise _UsageError("-np %d is below --min-np %d" % (np, min_np))
    if max_np is not None and max_np < np:
        raise _UsageError("--max-np %d is below -np %d" % (max_np, np))
    if args.reset_limit is not None and args.reset_limit < 0:
        raise _UsageError("--reset-limit must be 0 or more")
    if args.slots_per_host is not None and args.slots_per_host < 1:
        raise _UsageError("--slots-per-host must be at least 1")
    cooldown = args.blacklist_cooldown_range
    if cooldown is not None and not 0 <= cooldown[0] <= cooldown[1]:
        raise _UsageError("--blacklist-cooldown-range needs 0 <= MIN <= MAX, "
                          "not %g %g" % tuple(cooldown))
    if args.host_discovery_script is not None and args.hosts:
        raise _UsageError("give -H/-hostfile or --host-discovery-script, "
                          "not both")
    if args.mpi:
        raise _UsageError("elastic mode starts its workers itself; it cannot "
                          "run through --mpi")
    return np, min_np, max_np


def _run_elastic(args, before_start=None):
    """horovodrun's elastic mode (horovod.runner.elastic_driver).
    `before_start` as for main."""
    from horovod.runner import discovery, elastic_driver, probe as probe_mod

    def log(line):
        sys.stderr.write("horovodrun: %s\n" % line)
        sys.stderr.flush()

    try:
        np, min_np, max_np = _elastic_sizes(args)
    except _UsageError as e:
        log(e)
        return 2
    if args.host_discovery_script is not None:
        source = discovery.ScriptDiscovery(args.host_discovery_script,
                                           args.slots_per_host)
    else:
        source = discovery.FixedHosts(dict(_parse_hosts(args.hosts, np)))
    try:
        first = source.find()
    except discovery.DiscoveryError as e:
        log(e)
        return 1
    env, timeout_s, ssh, forced = _launch_settings(args)
    secret = env["HOROVOD_SECRET_KEY"]
    env["PYTHONUNBUFFERED"] = "1"
    elastic_timeout = (args.elastic_timeout if args.elastic_timeout is not None
                       else float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT",
                                                 600)))
    networked = not all(is_local(h) for h in first)
    addrs, iface = {}, None
    driver_addrs, bind = ["127.0.0.1"], "127.0.0.1"
    if networked or (source.may_add and first):
        try:
            addrs, iface, _ = find_addresses(list(first), ssh, secret, forced,
                                             timeout_s,
                                             preexec_fn=die_with_parent)
            networked = True
        except LaunchError as e:
            if networked:
                log(e)
                return 1
            # This host alone, with no network to offer hosts that appear
            # later: its workers talk over loopback.
    if networked:
        mine = [addrs[h] for h in first if is_local(h)]
        # Workers find the driver on this host's address on the job's
        # network when this host is one of the job's, else on any of its
        # addresses (each connection proves the secret first).
        driver_addrs = mine or [a for a in probe_mod.interfaces().values()
                                if not a.startswith("127.")]
        bind = mine[0] if mine else "0.0.0.0"
    if before_start is not None:
        env.update(before_start(addrs if networked else None, secret))

    def probe(host):
        if not networked:
            if is_local(host):
                return None
            raise LaunchError("this job's workers listen on loopback only: "
                              "it started on this host, which has no network "
                              "interface to offer other hosts")
        if host in addrs:
            return addrs[host]
        found, _, _ = find_addresses([host], ssh, secret, [iface], timeout_s,
                                     preexec_fn=die_with_parent)
        return found[host]

    output = Output(args.output_filename, 1, args.prefix_output_with_timestamp)
    pumps = []

    def start_worker(wid, host, slot, extra):
        worker = dict(elastic_driver.worker_env(env))
        worker.update(extra)
        if args.verbose:
            log("starting worker %s:%d: %s" % (host, slot,
                                               " ".join(args.command)))
        r = _Rank("%s:%d" % (host, slot), host, worker, args.command, ssh)
        r.start()
        pumps.extend(start_pumps(r, output))
        return r

    cooldown = args.blacklist_cooldown_range
    driver = elastic_driver.ElasticDriver(
        source, discovery.HostManager(tuple(cooldown) if cooldown else None),
        np, min_np, max_np, elastic_timeout, args.reset_limit, secret,
        driver_addrs, bind, start_worker, probe, log, addrs,
        verbose=args.verbose)
    interrupts = []

    def on_signal(signum, _frame):
        # Ctrl-C or SIGTERM reaches every worker as itself; the driver then
        # stops them all, escalating to SIGKILL.
        interrupts.append(time.monotonic())
        if len(interrupts) == 1:
            driver.signal_all(signum)

    try:
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    except ValueError:
        pass
    code = driver.run(interrupts)
    for t in list(pumps):
        t.join(timeout=2)
    if interrupts:
        log("interrupted; every worker stopped")
    return code


def _given(parser, argv):
    """The destinations of the flags on the command line (before the
    command), for --config-file not to override them."""
    options = {o: a.dest for a in parser._actions for o in a.option_strings}
    given = set()
    for token in argv:
        if not token.startswith("-"):
            continue
        name = token.split("=", 1)[0]
        matches = [o for o in options if o == name] or \
            [o for o in options if o.startswith(name) and name.startswith("--")]
        if len(matches) == 1:
            given.add(options[matches[0]])
    return given


_LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


def main(argv=None, before_start=None):
    """horovodrun. `before_start(addresses, secret)`, when given, runs once
    the hosts are checked and before any rank starts (addresses: {host:
    address} across hosts, None on this host alone) and returns variables
    to add to every rank's environment (horovod.run uses it)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        sys.stderr.write("horovodrun: %s\n" % e)
        return 2
    if args.config_file:
        try:
            config_file.apply(args, args.config_file,
                              _given(parser, argv[:len(argv) - len(args.command)]))
        except config_file.ConfigError as e:
            sys.stderr.write("horovodrun: %s\n" % e)
            return 2
    if args.log_level is not None:
        if args.log_level.upper() not in _LOG_LEVELS:
            sys.stderr.write("horovodrun: --log-level %s is not one of %s\n"
                             % (args.log_level, ", ".join(_LOG_LEVELS)))
            return 2
        args.log_level = args.log_level.upper()
    for flag, (_, why) in _UNSUPPORTED.items():
        if getattr(args, "unsupported_" + flag.lstrip("-").replace("-", "_")):
            sys.stderr.write("horovodrun: %s is not supported by this build: "
                             "%s\n" % (flag, why))
            return 2
    if args.hostfile:
        if args.hosts:
            sys.stderr.write("horovodrun: give -H or -hostfile, not both\n")
            return 2
        args.hosts = _hosts_from_file(args.hostfile)
    if args.version:
        print(horovod.__version__)
        return 0
    if args.check_build:
        check_build()
        return 0
    if not args.command:
        sys.stderr.write("horovodrun: no command to run\n")
        return 2
    if _is_elastic(args):
        return _run_elastic(args, before_start)
    if args.np is None or args.np < 1:
        sys.stderr.write("horovodrun: -np must be a positive number of ranks\n")
        return 2
    hosts = _parse_hosts(args.hosts, args.np)
    if sum(s for _, s in hosts) < args.np:
        sys.stderr.write("horovodrun: -np %d exceeds the %d slots in -H %s\n"
                         % (args.np, sum(s for _, s in hosts), args.hosts))
        return 2
    env, timeout_s, ssh, forced = _launch_settings(args)
    used = list(dict.fromkeys(p[0] for p in placement(hosts, args.np)))
    network, iface = None, None
    if not all(is_local(h) for h in used):
        try:
            addrs, iface, port = find_addresses(
                used, ssh, env["HOROVOD_SECRET_KEY"], forced, timeout_s,
                preexec_fn=die_with_parent)
        except LaunchError as e:
            sys.stderr.write("horovodrun: %s\n" % e)
            return 1
        if args.verbose:
            sys.stderr.write("horovodrun: ranks talk over %s: %s\n" % (
                iface, ", ".join("%s=%s" % kv for kv in addrs.items())))
        network = (addrs, port)
    if before_start is not None:
        env.update(before_start(network[0] if network else None,
                                env["HOROVOD_SECRET_KEY"]))
    if args.mpi:
        return _run_through_mpirun(args, env, hosts, iface)
    output = Output(args.output_filename, args.np,
                    args.prefix_output_with_timestamp)
    job = _Job(args.command, env, hosts, args.np, args.verbose, network, ssh,
               output)
    interrupts = []  # monotonic times of Ctrl-C presses

    def on_sigint(_signum, _frame):
        # The first Ctrl-C reaches every rank as SIGINT; the wait loop
        # escalates if they outlive the grace period, a second one at once.
        interrupts.append(time.monotonic())
        job.stopping = True
        if len(interrupts) == 1:
            job.signal_all(signal.SIGINT)

    def on_sigterm(signum, _frame):
        job.stopping = True
        job.signal_all(signum)

    try:
        signal.signal(signal.SIGINT, on_sigint)
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:
        pass  # horovod.run from a thread other than the main one
    job.start()
    code, failed = job.wait(interrupts)
    if interrupts:
        job.stop(grace_s=_TERM_GRACE_S, interrupts=interrupts)
    elif failed is not None:
        if not job.stopping:
            sys.stderr.write("horovodrun: rank %d exited with code %d; stopping "
                             "the other ranks\n" % (failed, code))
        job.stop()
    for t in job.pumps:
        t.join(timeout=2)
    if interrupts:
        sys.stderr.write("horovodrun: interrupted; every rank stopped\n")
        return 130
    if failed is not None:
        sys.stderr.write("horovodrun: job failed: rank %d exited with code %d\n"
                         % (failed, code))
        return code if code > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
