"""Ranks for processes that a cluster manager started where it chose
(Spark's barrier tasks, Ray's actors): which rank each gets, and the
environment under which the engine's `hvd.init()` joins that job.

The processes come as a list of host keys, one per process. Ranks are
grouped by host (hosts in the order of their first process, processes of
a host in list order), so the ranks of a host are contiguous, the first
process is rank 0, and the engine's own host detection agrees with the
grouping: `host_key()` is the key the engine derives when HOROVOD_HOSTNAME
is unset (host name and kernel boot id: two containers can share a name
but not memory).
"""

import socket


def host_key():
    """This host's identity as the engine derives it."""
    key = socket.gethostname()
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().split()
    except OSError:
        boot = []
    return key + "/" + boot[0] if boot else key


def reserve_port(addr):
    """A socket bound to a free port on `addr`, held so no other process
    on the host reports the same port while a rank's placement is being
    agreed; close it just before the rank (rank 0: the engine's
    controller) listens there."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((addr, 0))
    except OSError:
        sock.close()
        raise
    return sock


def assign_ranks(hosts):
    """For `hosts` (one host key per process) the placement of each process,
    in list order: dicts with rank, size, local_rank, local_size,
    cross_rank and cross_size."""
    order = []
    for h in hosts:
        if h not in order:
            order.append(h)
    members = {h: [i for i, k in enumerate(hosts) if k == h] for h in order}
    out = [None] * len(hosts)
    rank = 0
    for cross_rank, h in enumerate(order):
        for local_rank, i in enumerate(members[h]):
            out[i] = {"rank": rank, "size": len(hosts),
                      "local_rank": local_rank,
                      "local_size": len(members[h]),
                      "cross_rank": cross_rank, "cross_size": len(order)}
            rank += 1
    return out


def rank_env(place, host, bind_addr, controller_addr, controller_port,
             secret):
    """The HOROVOD_* variables for a process placed at `place` (from
    assign_ranks) on host `host`, listening on `bind_addr`, in the job whose
    rank 0 listens on controller_addr:controller_port."""
    env = {"HOROVOD_" + k.upper(): str(v) for k, v in place.items()}
    env.update({"HOROVOD_HOSTNAME": host,
                "HOROVOD_BIND_ADDR": bind_addr,
                "HOROVOD_CONTROLLER_ADDR": controller_addr,
                "HOROVOD_CONTROLLER_PORT": str(controller_port),
                "HOROVOD_SECRET_KEY": secret,
                "PYTHONUNBUFFERED": "1"})
    return env
