"""horovodrun's command line: the parser (upstream's flags, those this
build does not provide refused by name), the HOROVOD_* variables its tuning
flags set, host files, and which flags a command line gave."""

import argparse
import numbers
import os


# Upstream flags this build does not provide: (values they take, why).
UNSUPPORTED = {
    "--jsrun": (0, "jsrun (LSF) launching is not built"),
    "--mpi-threads-disable": (0, "there is no MPI controller in this build"),
    "--binding-args": (1, "there is no MPI controller in this build"),
    "--num-nccl-streams": (1, "this build has no NCCL (CPU engine)"),
    "--thread-affinity": (1, "thread affinity is not built"),
    "--gloo-timeout-seconds": (1, "there is no Gloo controller in this build"),
}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line instead of a usage dump."""

    def error(self, message):
        raise UsageError("%s (see horovodrun --help)" % message)


def parse_args(argv):
    return make_parser().parse_args(argv)


def make_parser():
    parser = _Parser(
        prog="horovodrun",
        description="Launch a Horovod job on this machine or, over ssh, "
                    "across hosts.")
    for flag, (nargs, _) in UNSUPPORTED.items():
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


def parse_hosts(spec, np):
    """[(host, slots)] of -H's "host:slots,host" (a host alone has one
    slot); raises UsageError naming an entry that is neither."""
    if not spec:
        return [("localhost", np)]
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, slots = item.partition(":")
        if not name or (slots and not (slots.isdigit() and int(slots) > 0)):
            raise UsageError(
                "-H %s: %r is not host or host:slots with slots a positive "
                "number" % (spec, item))
        hosts.append((name, int(slots) if slots else 1))
    return hosts


def hosts_from_file(path):
    """'host slots=N' (or 'host:N', or 'host') per line; # comments.
    Raises UsageError naming a file it cannot read or a line whose slots
    are not a positive number."""
    hosts = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError("cannot read -hostfile %s: %s" % (path, e.strerror))
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        slots = "1"
        for item in rest:
            if item.startswith("slots="):
                slots = item[len("slots="):]
        if ":" in name:
            name, _, slots = name.partition(":")
        if not name or not (slots.isdigit() and int(slots) > 0):
            raise UsageError("-hostfile %s, line %d: %r is not host "
                             "[slots=N] or host:N with N a positive number"
                             % (path, number, line))
        hosts.append("%s:%d" % (name, int(slots)))
    return ",".join(hosts)


def check_settings(args):
    """What the parser cannot check: that -p is a port, and that the
    --output-filename folder can be made (it is made here, before any rank
    starts, rather than by the first rank to write a line), and that the
    start timeout is a positive number of seconds."""
    if args.ssh_port is not None and not 0 < args.ssh_port < 65536:
        raise UsageError("-p %d is not a port (1 to 65535)" % args.ssh_port)
    seconds(args.start_timeout, "--start-timeout", "HOROVOD_START_TIMEOUT", 30)
    if args.output_filename and not args.mpi:
        try:
            os.makedirs(args.output_filename, exist_ok=True)
        except OSError as e:
            raise UsageError("cannot make the --output-filename folder %s: %s"
                             % (args.output_filename, e.strerror or e)) \
                from None


def seconds(given, flag, variable, default):
    """A launcher timeout: the flag's value if `given`, else the variable's,
    else `default`; a positive number of seconds, or a UsageError naming
    where the value came from (before any rank starts)."""
    source = flag
    if given is None:
        source = variable
        try:
            given = float(os.environ.get(variable, default))
        except ValueError:
            raise UsageError("%s=%r is not a number of seconds" % (
                variable, os.environ[variable])) from None
    if not positive_seconds(given):
        raise UsageError("%s must be a positive number of seconds, not %s"
                         % (source, _shown(given)))
    return given


def positive_seconds(value):
    """Whether `value` is a positive, finite number (of seconds)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and 0 < value < float("inf")


def _shown(value):
    return "%g" % value if isinstance(value, numbers.Real) else repr(value)


def check_seconds(caller, **values):
    """For an API's timeouts given as arguments: a ValueError from `caller`
    naming the first that is not a positive number of seconds."""
    for name, value in values.items():
        if not positive_seconds(value):
            raise ValueError("%s: %s must be a positive number of seconds, "
                             "not %s" % (caller, name, _shown(value)))


def knob_env(args):
    """The HOROVOD_* variables horovodrun's tuning flags set (the knob table,
    src/common/knobs.cc, names the flag of each)."""
    env = {}
    if args.start_timeout is not None:
        env["HOROVOD_START_TIMEOUT"] = str(args.start_timeout)
    if args.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(
            int(args.fusion_threshold_mb * 1024 * 1024))
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


def given_flags(parser, argv):
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


LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")
