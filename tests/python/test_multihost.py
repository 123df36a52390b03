"""Jobs across hosts: test hosts in network namespaces (tests/multihost/
testhosts.py), each with its own address, hostname, /dev/shm and sshd.
horovodrun runs on host hvd-h1 the way a user runs it on one node of a
cluster and reaches the others over ssh.

Needs root and Debian's openssh-server and iproute2 (scripts/setup.sh
installs them); where the machine refuses network namespaces every case
skips with the reason."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import HERE, worker
from test_faults import DEAD_PEER_BOUND_S, Watched, check_survivors, kill_all

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "multihost"))
import testhosts  # noqa: E402
import testslurm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable


def _unavailable():
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces)"
    for tool in ("ip", "nsenter", "unshare", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return "%s is not installed (scripts/setup.sh installs it)" % tool
    if not os.path.exists("/usr/sbin/sshd"):
        return "openssh-server is not installed (scripts/setup.sh installs it)"
    probe = subprocess.run(["ip", "netns", "add", "hvdt-canary"],
                           capture_output=True, text=True)
    subprocess.run(["ip", "netns", "delete", "hvdt-canary"], capture_output=True)
    if probe.returncode != 0:
        return "this machine refuses network namespaces: %s" % probe.stderr.strip()
    return None


@pytest.fixture(scope="module")
def hosts():
    why = _unavailable()
    if why:
        print("SKIPPED multi-host tests: %s" % why)
        pytest.skip(why)
    testhosts.up(3)
    try:
        yield testhosts
    finally:
        testhosts.down()


def on_host(i, argv, timeout=240):
    """Runs argv on test host i (as a user logged in there would)."""
    return subprocess.run(testhosts.exec_argv(i, argv, ROOT), capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def horovodrun(*args, timeout=240):
    """horovodrun on host hvd-h1."""
    return on_host(1, [PY, "-m", "horovod.runner"] + [str(a) for a in args],
                   timeout=timeout)


def place_records(text):
    """{rank: record} of the PLACE lines in text, also where ranks sharing
    one output stream ran their lines into each other."""
    found = {}
    for chunk in text.split("PLACE ")[1:]:
        record, _ = json.JSONDecoder().raw_decode(chunk)
        found[record["rank"]] = record
    return found


def places(out):
    return place_records(out.stdout)


def test_two_hosts_two_ranks_each_run_where_placed(hosts):
    out = horovodrun("-np", 4, "-H", "hvd-h1:2,hvd-h2:2", PY,
                     worker("placement.py"), "a b")
    assert out.returncode == 0, out.stderr[-3000:]
    p = places(out)
    assert sorted(p) == [0, 1, 2, 3], out.stdout
    for r in range(4):
        assert p[r]["hostname"] == "hvd-h%d" % (1 + r // 2), p[r]
        assert (p[r]["local_rank"], p[r]["local_size"]) == (r % 2, 2), p[r]
        assert (p[r]["cross_rank"], p[r]["cross_size"]) == (r // 2, 2), p[r]
        assert p[r]["homogeneous"] is True
        assert p[r]["sum"] == 6.0
        assert p[r]["hosts"] == ["hvd-h1", "hvd-h1", "hvd-h2", "hvd-h2"]
        assert p[r]["cwd"] == ROOT and p[r]["argv"] == ["a b"]
    # Output comes back prefixed with the rank, remote ranks' too.
    assert any(l.startswith("[3]<stdout>:PLACE ") for l in out.stdout.splitlines())


def test_uneven_slots_from_a_hostfile_on_hosts_other_than_the_launchers(
        hosts, tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# two nodes\nhvd-h2 slots=1\nhvd-h3 slots=4\n")
    out = horovodrun("-np", 3, "-hostfile", hostfile, PY, worker("placement.py"))
    assert out.returncode == 0, out.stderr[-3000:]
    p = places(out)
    expect = {0: ("hvd-h2", 0, 1, 0), 1: ("hvd-h3", 0, 2, 1),
              2: ("hvd-h3", 1, 2, 1)}
    for r, (host, local_rank, local_size, cross_rank) in expect.items():
        got = p[r]
        assert (got["hostname"], got["local_rank"], got["local_size"],
                got["cross_rank"], got["cross_size"]) == \
            (host, local_rank, local_size, cross_rank, 2), got
        assert got["homogeneous"] is False and got["sum"] == 3.0


@pytest.mark.parametrize("algorithms", [
    [], ["--no-hierarchical-allreduce", "--no-hierarchical-allgather"]],
    ids=["hierarchical", "flat"])
def test_every_collective_across_two_hosts(hosts, algorithms):
    out = horovodrun("-np", 4, "-H", "hvd-h1:2,hvd-h2:2", *algorithms, PY,
                     worker("checks.py"), "collectives", timeout=280)
    results = [l.split(":", 1)[1].split() for l in out.stdout.splitlines()
               if ":CHECK " in l and l.split(":", 1)[1].startswith("CHECK ")]
    failed = [r for r in results if r[2] != "PASS"]
    assert out.returncode == 0 and not failed, (failed, out.stdout[-3000:],
                                                out.stderr[-3000:])
    names = {r[1] for r in results}
    assert len(names) >= 15 and len(results) == 4 * len(names), results


def test_a_host_whose_sshd_is_down_is_named(hosts):
    hosts.stop_sshd(3)
    try:
        t0 = time.monotonic()
        out = horovodrun("-np", 3, "-H", "hvd-h1:1,hvd-h2:1,hvd-h3:1",
                         "--start-timeout", 10, PY, worker("placement.py"))
        took = time.monotonic() - t0
    finally:
        hosts.start_sshd(3)
    print("sshd down: horovodrun failed after %.2f s: %s" % (took, out.stderr))
    assert out.returncode != 0
    assert "PLACE" not in out.stdout  # no rank started anywhere
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("horovodrun: cannot start on host hvd-h3 (ssh: "
                               ), lines
    assert "Connection refused" in lines[0], lines
    assert "hvd-h2" not in lines[0]
    assert took < 10 + 5


def test_a_forced_interface_one_host_lacks_is_named(hosts):
    ns = testhosts.netns(1)
    # eth1 on hvd-h1 only: one end of a veth pair that leads nowhere.
    subprocess.run(["ip", "-n", ns, "link", "add", "eth1", "type", "veth",
                    "peer", "name", "eth1-end"], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "addr", "add", "10.231.8.11/24", "dev",
                        "eth1"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth1", "up"], check=True)
        out = horovodrun("-np", 2, "-H", "hvd-h1:1,hvd-h2:1",
                         "--network-interface", "eth1", PY,
                         worker("placement.py"))
        assert out.returncode != 0
        assert out.stderr.strip() == ("horovodrun: network interface eth1 is "
                                      "missing on host hvd-h2"), out.stderr
        # Unforced, the job takes the interface every host has.
        out = horovodrun("-np", 2, "-H", "hvd-h1:1,hvd-h2:1", "--verbose", PY,
                         worker("placement.py"))
        assert out.returncode == 0, out.stderr[-2000:]
        assert "ranks talk over eth0" in out.stderr
    finally:
        subprocess.run(["ip", "-n", ns, "link", "delete", "eth1"])


def _start_ranks_on_hosts(mode, per_host=2, hosts_used=(1, 2), env=None):
    """The job's ranks started directly on the test hosts (no launcher
    supervising them), so each survivor of a fault can be watched."""
    n = per_host * len(hosts_used)
    procs = []
    for r in range(n):
        i = hosts_used[r // per_host]
        e = dict(os.environ)
        e.update({"HOROVOD_RANK": str(r), "HOROVOD_SIZE": str(n),
                  "HOROVOD_LOCAL_RANK": str(r % per_host),
                  "HOROVOD_LOCAL_SIZE": str(per_host),
                  "HOROVOD_CROSS_RANK": str(r // per_host),
                  "HOROVOD_CROSS_SIZE": str(len(hosts_used)),
                  "HOROVOD_HOSTNAME": testhosts.host_name(i),
                  "HOROVOD_CONTROLLER_ADDR": testhosts.host_addr(hosts_used[0]),
                  "HOROVOD_CONTROLLER_PORT": "29555",
                  "HOROVOD_BIND_ADDR": testhosts.host_addr(i),
                  "HOROVOD_SECRET_KEY": "a" * 64, "PYTHONUNBUFFERED": "1"})
        e.update(env or {})
        procs.append(subprocess.Popen(
            testhosts.exec_argv(i, [PY, worker("faults.py"), mode]), env=e,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [Watched(p) for p in procs]


def test_a_rank_killed_on_the_remote_host_fails_every_survivor_naming_it(hosts):
    ranks = _start_ranks_on_hosts("allreduce",
                                  env={"HOROVOD_OPERATION_TIMEOUT_SECONDS": "3"})
    try:
        deadline = time.monotonic() + 120
        for r, w in enumerate(ranks):
            assert w.wait_for("READY", deadline), (r, w.err[-20:])
        time.sleep(0.2)
        t0 = time.monotonic()
        os.kill(ranks[3].proc.pid, signal.SIGKILL)  # nsenter execs: the rank
        took = check_survivors("remote SIGKILL", ranks, [0, 1, 2], t0,
                               DEAD_PEER_BOUND_S, [3])
        print("rank 3 on hvd-h2 killed: survivors failed after %s s"
              % {r: round(t, 2) for r, t in took.items()})
    finally:
        kill_all(ranks)
    for i in (1, 2):
        assert on_host(i, ["ls", "/dev/shm"]).stdout.split() == []


def _leftovers(i, before):
    """Processes on host i that were not there before the job, and its
    /dev/shm entries."""
    pids = [p for p in testhosts.host_pids(i) if p not in before]
    return pids, on_host(i, ["ls", "/dev/shm"]).stdout.split()


def _start_held_job(tmp_path):
    argv = testhosts.exec_argv(1, [PY, "-m", "horovod.runner", "-np", "4", "-H",
                                   "hvd-h1:2,hvd-h2:2", PY,
                                   worker("faults.py"), "hold", str(tmp_path)])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT)
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("pid.*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(list(tmp_path.glob("pid.*"))) < 4:
        proc.kill()
        pytest.fail("the ranks did not start: %s" % proc.stderr.read()[-2000:])
    return proc


@pytest.mark.parametrize("how", ["SIGKILL", "Ctrl-C"])
def test_stopping_the_launcher_leaves_nothing_on_any_host(hosts, tmp_path, how):
    before = {i: set(testhosts.host_pids(i)) for i in (1, 2)}
    proc = _start_held_job(tmp_path)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGINT)
    proc.wait(60)
    while time.monotonic() - t0 < 30 and any(
            _leftovers(i, before[i])[0] for i in (1, 2)):
        time.sleep(0.05)
    took = time.monotonic() - t0
    print("launcher %s: every process on every host gone after %.2f s"
          % (how, took))
    for i in (1, 2):
        assert _leftovers(i, before[i]) == ([], []), i
    assert took < DEAD_PEER_BOUND_S + 5
    if how == "Ctrl-C":
        assert proc.returncode == 130, proc.stderr.read()


def test_the_digits_example_trains_across_hosts(hosts):
    out = horovodrun("-np", 4, "-H", "hvd-h1:2,hvd-h2:2", PY,
                     os.path.join(ROOT, "examples", "pytorch_digits.py"),
                     "--epochs", 3, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [l for l in out.stdout.splitlines() if "final test accuracy:" in l]
    assert lines, out.stdout[-2000:]
    assert float(lines[0].split("final test accuracy:")[1].split()[0]) > 0.85


_MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.mark.parametrize("how,slots", [
    ("mpirun", (2, 2)), ("horovodrun --mpi", (2, 2)),
    # Uneven: mpirun's environment has local numbers only; the host numbers
    # come from every rank's host key at the rendezvous.
    ("mpirun", (3, 1))])
def test_mpirun_across_hosts_finds_rank_0_by_itself(hosts, how, slots):
    """mpirun gives the ranks no address for rank 0: rank 0 posts one
    through OpenMPI's PMIx server. Launched from hvd-h3, so rank 0 is on
    another host than the launcher."""
    spec = "hvd-h1:%d,hvd-h2:%d" % slots
    if how == "mpirun":
        argv = ["mpirun", "-np", "4", "-H", spec, "--bind-to", "none", "-x",
                "PATH"]
    else:
        argv = [PY, "-m", "horovod.runner", "--mpi", "-np", "4", "-H", spec]
    old = {k: os.environ.get(k) for k in _MPI_ENV}
    os.environ.update(_MPI_ENV)
    try:
        out = on_host(3, argv + [PY, worker("placement.py")])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    assert out.returncode == 0, out.stderr[-3000:]
    p = places(out)
    assert sorted(p) == [0, 1, 2, 3], out.stdout
    first = slots[0]
    for r in range(4):
        host = 0 if r < first else 1
        assert p[r]["hostname"] == "hvd-h%d" % (host + 1), p[r]
        assert (p[r]["local_rank"], p[r]["local_size"], p[r]["cross_rank"],
                p[r]["cross_size"], p[r]["homogeneous"]) == \
            (r - host * first, slots[host], host, 2, slots[0] == slots[1]), p[r]
        assert p[r]["sum"] == 6.0


def test_horovod_run_across_hosts_returns_every_ranks_value(hosts):
    code = """
import socket
import horovod

def f(scale):
    import horovod.torch as hvd, torch
    hvd.init()
    total = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum).item()
    return (hvd.rank(), socket.gethostname(), scale * total)

print(horovod.run(f, args=(10,), np=4, hosts="hvd-h2:2,hvd-h3:2"))
"""
    out = on_host(1, [PY, "-c", code], timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == str(
        [(0, "hvd-h2", 40.0), (1, "hvd-h2", 40.0), (2, "hvd-h3", 40.0),
         (3, "hvd-h3", 40.0)])


def test_the_digits_example_starts_itself_across_hosts(hosts):
    out = on_host(1, [PY, os.path.join(ROOT, "examples", "pytorch_digits.py"),
                      "--num-proc", "4", "--hosts", "hvd-h1:2,hvd-h2:2",
                      "--epochs", "3"], timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    last = out.stdout.splitlines()[-1]
    assert last.startswith("final test accuracy: ") and \
        last.endswith("(ranks=4, global batch=64, through horovod.run)"), last
    assert float(last.split()[3]) > 0.85


def test_torchrun_with_two_nodes(hosts):
    """torchrun's c10d rendezvous on hvd-h1; the ranks find rank 0 next to
    torchrun's store and share the secret the user exports."""
    env = dict(os.environ, HOROVOD_SECRET_KEY=os.urandom(32).hex())
    procs = []
    for i in (1, 2):
        argv = ["torchrun", "--nnodes", "2", "--nproc-per-node", "2",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", "hvd-h1:29400",
                "--rdzv-id", "two-nodes", worker("placement.py")]
        procs.append(subprocess.Popen(testhosts.exec_argv(i, argv, ROOT),
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            outs.append(out)
    finally:
        for p in procs:
            p.kill()
    p = place_records("".join(outs))
    assert sorted(p) == [0, 1, 2, 3]
    by_host = sorted((d["hostname"], d["local_rank"], d["cross_rank"], d["sum"])
                     for d in p.values())
    assert by_host == [("hvd-h1", 0, 0, 6.0), ("hvd-h1", 1, 0, 6.0),
                       ("hvd-h2", 0, 1, 6.0), ("hvd-h2", 1, 1, 6.0)], by_host


@pytest.fixture(scope="module")
def slurm(hosts):
    for daemon in ("slurmctld", "slurmd", "munged"):
        if shutil.which(daemon, path="/usr/sbin:/usr/bin") is None:
            why = "%s is not installed (scripts/setup.sh installs slurm-wlm " \
                  "and munge)" % daemon
            print("SKIPPED Slurm tests: %s" % why)
            pytest.skip(why)
    testslurm.up(2)
    try:
        yield testslurm
    finally:
        testslurm.down()


def srun(*args, env=None, timeout=180):
    """srun on hvd-h1 against the test cluster."""
    full = dict(os.environ, SLURM_CONF=testslurm.conf())
    full.pop("HOROVOD_SECRET_KEY", None)
    full.update(env or {})
    return subprocess.run(testhosts.exec_argv(1, ["srun"] + [str(a) for a in args],
                                              ROOT),
                          capture_output=True, text=True, timeout=timeout,
                          env=full)


@pytest.mark.parametrize("how", ["pmix", "exported secret"])
def test_srun_across_nodes_finds_rank_0_without_master_addr(slurm, how):
    """srun --mpi=pmix: rank 0 posts its address and a fresh secret through
    Slurm's PMIx server. Without PMIx, rank 0 listens on the step's first
    node and the user's exported secret authenticates the ranks."""
    if how == "pmix":
        out = srun("--mpi=pmix", "-N", 2, "-n", 3, PY, worker("placement.py"))
    else:
        out = srun("-N", 2, "-n", 3, PY, worker("placement.py"),
                   env={"HOROVOD_SECRET_KEY": os.urandom(32).hex()})
    assert out.returncode == 0, out.stderr[-3000:]
    p = place_records(out.stdout)
    assert sorted(p) == [0, 1, 2], out.stdout
    # Slurm fills the first node first: tasks per node "2,1".
    got = [(p[r]["hostname"], p[r]["local_rank"], p[r]["local_size"],
            p[r]["cross_rank"], p[r]["cross_size"]) for r in range(3)]
    assert got == [("hvd-h1", 0, 2, 0, 2), ("hvd-h1", 1, 2, 0, 2),
                   ("hvd-h2", 0, 1, 1, 2)], got
    assert all(p[r]["sum"] == 3.0 and p[r]["homogeneous"] is False
               for r in range(3))


def test_srun_across_nodes_without_a_way_to_share_a_secret_says_so(slurm):
    out = srun("-N", 2, "-n", 2, PY, "-c",
               "import horovod.torch as hvd; hvd.init()")
    assert out.returncode != 0
    assert "export the same HOROVOD_SECRET_KEY to every task" in out.stderr, \
        out.stderr[-2000:]
