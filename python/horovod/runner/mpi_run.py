"""`horovodrun --mpi`: the ranks start through OpenMPI's mpirun instead of
the launcher's own ssh agents. The engine is the same: ranks read their
placement from OpenMPI's environment, and rank 0 posts its address and a
fresh secret through OpenMPI's PMIx server (a private file on one host).
Settings travel as exported variables (`-x VAR`), never as values on a
command line.
"""

import os
import shlex
import shutil
import signal
import subprocess
import sys

from horovod.runner.hosts import LaunchError, die_with_parent

# Besides every HOROVOD_* variable: what a Python rank needs to find the
# same interpreter and packages on every host.
_EXPORTED = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONUNBUFFERED",
             "VIRTUAL_ENV", "OMP_NUM_THREADS")


def mpirun_command(command, env, slots, iface=None, mpi_args=None):
    """mpirun's argv for `command` on hosts with `slots` ([(host, n)]) and
    the variables of env to export."""
    if shutil.which("mpirun", path=env.get("PATH")) is None:
        raise LaunchError("--mpi needs OpenMPI's mpirun on PATH")
    # As upstream: ranks in containers often run as root, which OpenMPI
    # refuses unless told.
    argv = ["mpirun", "--allow-run-as-root",
            "-np", str(sum(n for _, n in slots)),
            "-H", ",".join("%s:%d" % s for s in slots),
            "--bind-to", "none", "--map-by", "slot", "--tag-output"]
    if iface is not None:
        # OpenMPI's own traffic (its daemons, and any MPI a user's script
        # does) takes the interface the probe found as well.
        argv += ["-mca", "oob_tcp_if_include", iface,
                 "-mca", "btl_tcp_if_include", iface]
    for name in sorted(env):
        if name.startswith("HOROVOD_") or name in _EXPORTED:
            argv += ["-x", name]
    if mpi_args:
        argv += shlex.split(mpi_args)
    return argv + list(command)


def run(argv, env, verbose=False):
    """Runs mpirun until it exits; Ctrl-C and SIGTERM reach it (it stops
    every rank itself). Returns its exit code."""
    if verbose:
        sys.stderr.write("horovodrun: %s\n" % " ".join(shlex.quote(a)
                                                      for a in argv))
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            preexec_fn=die_with_parent)

    def forward(signum, _frame):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    try:
        old = {s: signal.signal(s, forward)
               for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # horovod.run from a thread other than the main one
        old = {}
    try:
        return proc.wait()
    finally:
        for s, handler in old.items():
            # None: a handler not set from Python, the default here.
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
