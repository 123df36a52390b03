#!/usr/bin/env python3
"""A Slurm cluster on the test hosts (testhosts.py): slurmctld on hvd-h1,
one slurmd per host, munge for authentication, all from Debian's
slurm-wlm and munge packages, configured in a folder of their own.

    testslurm.py up N     the hosts must be up; starts the cluster
    testslurm.py down     stops every daemon it started

Jobs are submitted from inside a host with SLURM_CONF set to `conf()`.
slurmd insists on a cgroup filesystem, and a host's /sys (remounted for
its network namespace) has none: each host gets the machine's cgroup v1
hierarchies mounted again. Processes are tracked without cgroups, tasks are
not bound to CPUs, and each node offers as many CPUs as the machine.
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testhosts  # noqa: E402

DIR = os.path.join(testhosts.STATE, "slurm")


def conf(i=None):
    """slurm.conf: the controller's and clients' (i None), or node i's.
    Each node has a folder of its own because PMIx's per-step folders are
    named only by job and step, and the hosts share /tmp."""
    folder = DIR if i is None else os.path.join(DIR, "node-h%d" % i)
    return os.path.join(folder, "slurm.conf")


def _write_conf(n):
    cpus = os.cpu_count() or 1
    nodes = "\n".join(
        "NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN"
        % (testhosts.host_name(i), testhosts.host_addr(i), cpus)
        for i in range(1, n + 1))
    text = """ClusterName=hvdtest
SlurmctldHost={ctl}({ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/spool-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=5
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""".format(ctl=testhosts.host_name(1), ctl_addr=testhosts.host_addr(1),
           dir=DIR, nodes=nodes)
    for i in [None] + list(range(1, n + 1)):
        folder = os.path.dirname(conf(i))
        os.makedirs(folder, exist_ok=True)
        with open(conf(i), "w") as f:
            f.write(text)
        with open(os.path.join(folder, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n")
        if i is not None:
            os.makedirs(os.path.join(DIR, "pmix-h%d" % i))
            os.makedirs(os.path.join(DIR, "spool-%s" % testhosts.host_name(i)))
            with open(os.path.join(folder, "mpi.conf"), "w") as f:
                f.write("PMIxCliTmpDirBase=%s\n"
                        % os.path.join(DIR, "pmix-h%d" % i))


_CGROUPS = """
set -e
mountpoint -q /sys/fs/cgroup && exit 0
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
for c in $(awk '$4 == 1 && $2 != 0 {print $1}' /proc/cgroups); do
  mkdir -p /sys/fs/cgroup/$c
  mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || rmdir /sys/fs/cgroup/$c
done
"""


def _mount_cgroups(i):
    subprocess.run(testhosts.exec_argv(i, ["/bin/sh", "-c", _CGROUPS], "/"),
                   check=True, capture_output=True)


def _munged():
    """One munged for every host: its socket lives in /run, which the
    hosts share with the machine."""
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return
    os.makedirs("/run/munge", exist_ok=True)
    subprocess.run(["chown", "munge:munge", "/run/munge"], check=False)
    if not os.path.exists("/etc/munge/munge.key"):
        subprocess.run(["mungekey", "--create"], check=True)
        subprocess.run(["chown", "munge:munge", "/etc/munge/munge.key"])
    subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"],
                   check=True)
    open(os.path.join(testhosts.STATE, "munged.ours"), "w").close()


def _daemon(i, argv):
    subprocess.run(testhosts.exec_argv(i, argv, "/"), check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def down():
    for name in ("slurmctld", "slurmd", "slurmstepd"):
        subprocess.run(["pkill", "-KILL", "-x", name], capture_output=True)
    ours = os.path.join(testhosts.STATE, "munged.ours")
    if os.path.exists(ours):  # started by up(), not by the machine
        subprocess.run(["pkill", "-x", "munged"], capture_output=True)
        os.unlink(ours)


def up(n):
    down()
    if os.path.isdir(DIR):
        subprocess.run(["rm", "-rf", DIR])
    os.makedirs(os.path.join(DIR, "ctld"))
    _write_conf(n)
    _munged()
    _daemon(1, ["/usr/sbin/slurmctld", "-f", conf(), "-i"])
    for i in range(1, n + 1):
        _mount_cgroups(i)
        _daemon(i, ["/usr/sbin/slurmd", "-f", conf(i), "-N",
                    testhosts.host_name(i)])
    env = dict(os.environ, SLURM_CONF=conf())
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(testhosts.exec_argv(1, ["sinfo", "-h", "-N", "-o",
                                                     "%N %T"], "/"),
                             capture_output=True, text=True, env=env)
        states = dict(l.split() for l in out.stdout.splitlines() if l.strip())
        if len(states) == n and all(s in ("idle", "mixed", "allocated")
                                    for s in states.values()):
            return
        if time.monotonic() > deadline:
            logs = ""
            for name in ("slurmctld.log", "slurmd-%s.log" % testhosts.host_name(1)):
                path = os.path.join(DIR, name)
                if os.path.exists(path):
                    logs += open(path).read()[-1500:]
            raise RuntimeError("Slurm did not come up: %r %s %s"
                               % (states, out.stderr, logs))
        time.sleep(0.5)


def main(argv):
    if argv and argv[0] == "up":
        up(int(argv[1]) if len(argv) > 1 else 2)
    elif argv and argv[0] == "down":
        down()
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
