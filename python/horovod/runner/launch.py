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
from horovod.runner import config_file, flags, mpi_run
from horovod.runner.check_build import check_build
from horovod.runner.hosts import (LaunchError, SshSettings, die_with_parent,
                                  find_addresses, is_local)
from horovod.runner.output import Output

# After Ctrl-C, ranks get this long to exit on SIGINT before SIGTERM, and
# as long again before SIGKILL.
_INT_GRACE_S = 5.0
_TERM_GRACE_S = 5.0


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            try:
                r.start()
            except OSError:
                # The command cannot start here (not found, not
                # executable): the ranks started before it go too.
                self.stopping = True
                stop_ranks([s for s in self.ranks if s.proc is not None])
                raise
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


def _run_through_mpirun(args, env, hosts, iface):
    """mpirun places the ranks itself, so rank 0's host is its choice: the
    ranks find rank 0 through OpenMPI's PMIx server (or a private file on
    one host), not through an address horovodrun would have to guess."""
    if args.output_filename:
        raise flags.UsageError("--output-filename is not supported with "
                               "--mpi (use mpirun's --output-filename in "
                               "--mpi-args)")
    slots = []
    for host, _, local_size, _, _ in placement(hosts, args.np):
        if not slots or slots[-1][0] != host:
            slots.append((host, local_size))
    env = dict(env, PYTHONUNBUFFERED="1")
    try:
        argv = mpi_run.mpirun_command(args.command, env, slots, iface,
                                      args.mpi_args)
    except LaunchError as e:
        raise flags.UsageError(str(e)) from None
    code = mpi_run.run(argv, env, args.verbose)
    if code != 0:
        sys.stderr.write("horovodrun: mpirun exited with code %d\n" % code)
    return code


def _launch_settings(args):
    """What every way of starting ranks needs: their environment (the
    tuning flags' variables and a fresh job secret added), the start
    timeout, the ssh settings and the forced network interfaces."""
    env = dict(os.environ)
    env.update(flags.knob_env(args))
    env["HOROVOD_SECRET_KEY"] = secrets.token_hex(32)
    timeout_s = flags.seconds(args.start_timeout, "--start-timeout",
                              "HOROVOD_START_TIMEOUT", 30)
    ssh = SshSettings(args.ssh_port, args.ssh_identity_file, timeout_s)
    forced = [i.strip() for i in (args.network_interfaces or "").split(",")
              if i.strip()]
    return env, timeout_s, ssh, forced


def _is_elastic(args):
    return (args.host_discovery_script is not None or args.min_np is not None
            or args.max_np is not None)


def _elastic_sizes(args):
    """(np, min_np, max_np), or raises flags.UsageError."""
    np = args.np if args.np is not None else args.min_np
    if np is None:
        raise flags.UsageError("elastic mode needs -np or --min-np")
    min_np = args.min_np if args.min_np is not None else np
    max_np = args.max_np
    if min_np < 1:
        raise flags.UsageError("--min-np must be at least 1, not %d" % min_np)
    if np < min_np:
        raise flags.UsageError("-np %d is below --min-np %d" % (np, min_np))
    if max_np is not None and max_np < np:
        raise flags.UsageError("--max-np %d is below -np %d" % (max_np, np))
    if args.reset_limit is not None and args.reset_limit < 0:
        raise flags.UsageError("--reset-limit must be 0 or more")
    if args.slots_per_host is not None and args.slots_per_host < 1:
        raise flags.UsageError("--slots-per-host must be at least 1")
    cooldown = args.blacklist_cooldown_range
    if cooldown is not None and not 0 <= cooldown[0] <= cooldown[1]:
        raise flags.UsageError("--blacklist-cooldown-range needs "
                               "0 <= MIN <= MAX, not %g %g" % tuple(cooldown))
    if args.host_discovery_script is not None and args.hosts:
        raise flags.UsageError("give -H/-hostfile or --host-discovery-script, "
                               "not both")
    if args.mpi:
        raise flags.UsageError("elastic mode starts its workers itself; it "
                               "cannot run through --mpi")
    return np, min_np, max_np


def _run_elastic(args, before_start=None):
    """horovodrun's elastic mode (horovod.runner.elastic_driver).
    `before_start` as for run_command_line; raises flags.UsageError as
    it does."""
    from horovod.runner import discovery, elastic_driver, probe as probe_mod

    def log(line):
        sys.stderr.write("horovodrun: %s\n" % line)
        sys.stderr.flush()

    np, min_np, max_np = _elastic_sizes(args)
    if args.host_discovery_script is not None:
        source = discovery.ScriptDiscovery(args.host_discovery_script,
                                           args.slots_per_host)
    else:
        source = discovery.FixedHosts(dict(flags.parse_hosts(args.hosts, np)))
    try:
        first = source.find()
    except discovery.DiscoveryError as e:
        log(e)
        return 1
    env, timeout_s, ssh, forced = _launch_settings(args)
    secret = env["HOROVOD_SECRET_KEY"]
    env["PYTHONUNBUFFERED"] = "1"
    elastic_timeout = flags.seconds(args.elastic_timeout,
                                    "--elastic-timeout",
                                    "HOROVOD_ELASTIC_TIMEOUT", 600)
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
    with _Signals(driver.signal_all) as signals:
        code = driver.run(signals.times)
        for t in list(pumps):
            t.join(timeout=2)
        return signals.exit_code("worker") if signals.times else code


class _Signals:
    """Ctrl-C, SIGTERM and SIGHUP (the terminal went away) while a job
    runs. The first reaches every rank through `forward(sig)`: Ctrl-C as
    SIGINT, the others as SIGTERM. `times` records when each came: the wait
    loops stop the ranks once they outlive a grace period, or at once on a
    second signal. SIGHUP is left alone when the launcher was started
    ignoring it (nohup). A context manager: the handlers it replaced come
    back at its end (horovod.run's caller gets its Ctrl-C back). Nothing is
    set from a thread other than the main one (horovod.run there), where
    Python cannot set handlers."""

    def __init__(self, forward, job=None):
        self.times = []  # monotonic times
        self._first = None
        self._forward = forward
        self._job = job
        self._replaced = {}

    def __enter__(self):
        wanted = [signal.SIGINT, signal.SIGTERM]
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            wanted.append(signal.SIGHUP)
        try:
            for sig in wanted:
                replaced = signal.signal(sig, self._on_signal)
                # None: a handler not set from Python, the default here.
                self._replaced[sig] = \
                    signal.SIG_DFL if replaced is None else replaced
        except ValueError:
            pass
        return self

    def __exit__(self, *_):
        for sig, handler in self._replaced.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum, _frame):
        self.times.append(time.monotonic())
        if self._job is not None:
            self._job.stopping = True
        if self._first is None:
            self._first = signum
            self._forward(signal.SIGINT if signum == signal.SIGINT
                          else signal.SIGTERM)

    def exit_code(self, what):
        """Once a signal stopped the job: says so, and returns the shell's
        code for a process that signal ended."""
        if self._first == signal.SIGINT:
            sys.stderr.write("horovodrun: interrupted; every %s stopped\n"
                             % what)
        else:
            sys.stderr.write("horovodrun: stopped by %s; every %s stopped\n"
                             % (signal.Signals(self._first).name, what))
        return 128 + self._first


def main(argv=None, before_start=None):
    """horovodrun: run_command_line, with a bad command line reported in one
    line and exit code 2."""
    try:
        return run_command_line(sys.argv[1:] if argv is None else argv,
                                before_start)
    except flags.UsageError as e:
        sys.stderr.write("horovodrun: %s\n" % e)
        return 2


def run_command_line(argv, before_start=None):
    """Runs the job horovodrun's command line `argv` describes; returns its
    exit code. Raises flags.UsageError, before any rank starts, for a
    command line that cannot run. `before_start(addresses, secret)`, when
    given, runs once the hosts are checked and before any rank starts
    (addresses: {host: address} across hosts, None on this host alone) and
    returns variables to add to every rank's environment (horovod.run uses
    it)."""
    parser = flags.make_parser()
    args = parser.parse_args(argv)
    if args.config_file:
        try:
            given = flags.given_flags(parser,
                                      argv[:len(argv) - len(args.command)])
            config_file.apply(args, args.config_file, given)
        except config_file.ConfigError as e:
            raise flags.UsageError(str(e)) from None
    if args.log_level is not None:
        if args.log_level.upper() not in flags.LOG_LEVELS:
            raise flags.UsageError("--log-level %s is not one of %s" % (
                args.log_level, ", ".join(flags.LOG_LEVELS)))
        args.log_level = args.log_level.upper()
    for flag, (_, why) in flags.UNSUPPORTED.items():
        if getattr(args, "unsupported_" + flag.lstrip("-").replace("-", "_")):
            raise flags.UsageError("%s is not supported by this build: %s"
                                   % (flag, why))
    if args.hostfile:
        if args.hosts:
            raise flags.UsageError("give -H or -hostfile, not both")
        args.hosts = flags.hosts_from_file(args.hostfile)
    if args.version:
        print(horovod.__version__)
        return 0
    if args.check_build:
        check_build()
        return 0
    if not args.command:
        raise flags.UsageError("no command to run")
    flags.check_settings(args)
    if _is_elastic(args):
        return _run_elastic(args, before_start)
    if args.np is None or args.np < 1:
        raise flags.UsageError("-np must be a positive number of ranks")
    hosts = flags.parse_hosts(args.hosts, args.np)
    if sum(s for _, s in hosts) < args.np:
        raise flags.UsageError("-np %d exceeds the %d slots in -H %s"
                               % (args.np, sum(s for _, s in hosts),
                                  args.hosts))
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
    with _Signals(job.signal_all, job) as signals:
        return _run_job(job, args.command, signals)


def _run_job(job, command, signals):
    """Starts `job` and waits for it; returns horovodrun's exit code."""
    interrupts = signals.times
    try:
        job.start()
    except OSError as e:
        sys.stderr.write("horovodrun: cannot start %s: %s\n"
                         % (command[0], e.strerror))
        # The shell's codes: 127 not found, 126 found but not runnable.
        return 127 if isinstance(e, FileNotFoundError) else 126
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
        return signals.exit_code("rank")
    if failed is not None:
        sys.stderr.write("horovodrun: job failed: rank %d exited with code %d\n"
                         % (failed, code))
        return code if code > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
