"""Multi-rank tests through the real launchers (horovodrun, mpirun,
torchrun) and a direct spawner. Each launch is bounded by a timeout."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import (assert_ok, collect, horovodrun, shm_segments_of,
                      spawn_ranks, worker)


# Each worker checks its own results and prints "<name> OK on rank r".
# (Collectives, gradients, the optimizer, errors, join and process sets:
# test_torch_api.py, a case per behaviour.)
WORKER_SUITES = [
    ("sync_bn.py", "sync_bn"),              # SyncBatchNorm vs BatchNorm
]


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("script,name", WORKER_SUITES)
def test_worker_suite(script, name, np):
    res = horovodrun(np, script)
    assert_ok(res)
    for r in range(np):
        assert "[%d]<stdout>:%s OK on rank %d" % (r, name, r) in res.stdout


@pytest.mark.parametrize("hosts,hierarchical,mac", [
    ("aabb", "1", "0"), ("aabb", "0", "0"),
    # Uneven, interleaved, and a host with a single rank (no shared memory);
    # every message between hosts carrying a MAC.
    ("abacc", "1", "0"), ("abacc", "1", "1")])
def test_simulated_hosts_share_memory_within_each(tmp_path, hosts,
                                                  hierarchical, mac):
    # Each rank claims the host named by its letter: ranks of one host form
    # a shared-memory group, hosts talk TCP. Allreduce goes hierarchically
    # (within hosts, across leaders, back within hosts) unless turned off;
    # rank 0's timeline shows which phases ran. Results agree either way.
    n = len(hosts)
    trace = str(tmp_path / "timeline.json")

    def rank_env(r):
        return {"HOROVOD_HOSTNAME": hosts[r],
                "HOROVOD_LOCAL_RANK": str(hosts[:r].count(hosts[r])),
                "HOROVOD_LOCAL_SIZE": str(hosts.count(hosts[r])),
                "HOROVOD_BIND_ADDR": "127.0.0.1",
                "HOROVOD_HIERARCHICAL_ALLREDUCE": hierarchical,
                "HOROVOD_DATA_MAC": mac,
                "HOROVOD_TIMELINE": trace}
    procs = spawn_ranks(n, "checks.py", "collectives", rank_env=rank_env)
    for r, (rc, out, err) in enumerate(collect(procs, timeout=240)):
        assert rc == 0, (out, err)
        assert "CHECK check_allreduce_in_place_large PASS" in out, out
        assert " FAIL" not in out, out
    with open(trace) as f:
        text = f.read()
    # Hosts with as many ranks each carry stripes across (every rank a
    # stripe); uneven ones, one leader each.
    even = len(set(hosts.count(h) for h in hosts)) == 1
    phases = (["SHM_HOST_REDUCESCATTER", "TCP_CROSS_ALLREDUCE",
               "SHM_HOST_ALLGATHER"] if even else
              ["SHM_HOST_ALLREDUCE", "TCP_CROSS_ALLREDUCE",
               "SHM_HOST_BROADCAST"])
    if hierarchical == "1":
        assert all(p in text for p in phases), text[-2000:]
    else:
        assert "HOST_" not in text and "CROSS_" not in text
        assert "TCP_ALLREDUCE" in text


def test_every_collective_over_tcp_with_the_data_mac():
    # Every message on the data links carries a tag: each algorithm's sender
    # and receiver must agree on where messages begin and end.
    env = {"HOROVOD_SHM_DISABLE": "1", "HOROVOD_DATA_MAC": "1"}
    procs = spawn_ranks(3, "checks.py", "collectives", env=env)
    for rc, out, err in collect(procs, timeout=240):
        assert rc == 0, (out, err)
        assert "CHECK check_allreduce_in_place_large PASS" in out, out
        assert " FAIL" not in out, out


@pytest.mark.parametrize("shm", ["1", "0"])
def test_killed_rank_fails_every_survivor_quickly(shm):
    env = {"HOROVOD_SHM_DISABLE": "0" if shm == "1" else "1"}
    procs = spawn_ranks(3, "killed_peer.py", env=env)
    start = time.monotonic()
    results = collect(procs, timeout=60)
    # Segments are unlinked once every rank has attached: nothing stays
    # behind, not even the dead rank's.
    assert shm_segments_of([p.pid for p in procs]) == []
    assert results[2][0] == -9, results[2]
    for rc, out, err in results[:2]:
        assert rc == 0, (out, err)
        assert "RAISED after" in out, out
        assert "rank 2" in out, out
        took = float(out.split("RAISED after ")[1].split(" s")[0])
        assert took < 10, out
    assert time.monotonic() - start < 60


def test_mismatched_submissions_stall_warning_then_failure():
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "1",
           "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    res = horovodrun(2, "stall.py", env=env, timeout=60)
    assert_ok(res)
    assert "missing on ranks [1]" in res.stderr, res.stderr
    assert res.stdout.count("stall OK") == 2


def test_horovodrun_prefixes_and_failure_exit():
    res = horovodrun(2, "fail_rank.py", timeout=60)
    assert res.returncode == 7, res
    assert "[0]<stdout>:hello from 0" in res.stdout
    assert "[1]<stderr>:" in res.stderr
    assert "rank 1 exited with code 7" in res.stderr


def test_horovodrun_check_build():
    out = subprocess.run([sys.executable, "-m", "horovod.runner", "--check-build"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "Available Frameworks:" in out.stdout
    for framework in ("PyTorch", "TensorFlow", "Keras", "JAX"):
        assert "[X] %s" % framework in out.stdout, out.stdout
    assert "Available Tensor Operations:" in out.stdout


@pytest.mark.parametrize("flag,value", [("--hierarchical-allreduce", "1"),
                                        ("--no-hierarchical-allreduce", "0")])
def test_horovodrun_hierarchical_allreduce_flags(flag, value):
    code = "import os; print('H=' + os.environ['HOROVOD_HIERARCHICAL_ALLREDUCE'])"
    out = subprocess.run([sys.executable, "-m", "horovod.runner", "-np", "1",
                          flag, sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "H=" + value in out.stdout, out.stdout


def test_secret_not_on_command_line():
    res = horovodrun(2, "cmdline.py", timeout=60)
    assert_ok(res)
    assert res.stdout.count("cmdline OK") == 2


def test_plain_python_is_size_one():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOROVOD_", "OMPI_", "PMIX_"))
           and k not in ("RANK", "WORLD_SIZE")}
    out = subprocess.run([sys.executable, worker("basic.py")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "basic OK rank=0 size=1" in out.stdout


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI not installed")
def test_mpirun_launch():
    env = dict(os.environ, EXPECT_SIZE="2", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe",
                          "-np", "2", sys.executable, worker("basic.py")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("basic OK") == 2, out.stdout


def test_torchrun_launch():
    env = dict(os.environ, EXPECT_SIZE="2")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run",
                          "--nproc-per-node", "2", worker("basic.py")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("basic OK") == 2, out.stdout


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_horovodrun_forwards_sigterm_to_every_rank(tmp_path, sig):
    # SIGHUP (the terminal went away) stops the job as SIGTERM does.
    import signal
    sig = getattr(signal, sig)
    # As from a terminal: a runner under nohup would pass SIGHUP ignored,
    # and horovodrun then leaves it so.
    proc = subprocess.Popen([sys.executable, "-m", "horovod.runner", "-np", "2",
                             sys.executable, worker("sleeper.py"), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP,
                                                             signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("pid.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
    assert len(pids) == 2
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("horovodrun did not exit after %s" % sig.name)
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    assert b"horovodrun: stopped by %s; every rank stopped" % \
        sig.name.encode() in err, err
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid) or \
            open("/proc/%d/stat" % pid).read().split()[2] == "Z", pid


# Allgather with empty ranks, half precision NaN/Inf,
# 10,000 tiny tensors a step for 20 steps (results checked every step,
# resident memory growth from the fifth step on under 10%), over shared
# memory and (marked slow) over TCP. Three ranks on two cores: each step
# takes about a second.
@pytest.mark.parametrize(
    "transport", ["shm", pytest.param("tcp", marks=pytest.mark.slow)])
def test_bad_values_and_many_tiny_tensors(transport):
    env = {"HOROVOD_SHM_DISABLE": "1" if transport == "tcp" else "0"}
    res = horovodrun(3, "load.py", 20, 10000, timeout=280, env=env)
    assert_ok(res)
    assert res.stdout.count("load OK") == 3


# 16 ranks on 2 cores: finishes, nobody starves.
def test_sixteen_ranks_on_two_cores():
    res = horovodrun(16, "load.py", 5, 200, timeout=280)
    assert_ok(res)
    assert res.stdout.count("load OK") == 16


# Opt-in (4 GiB of tensors, ~20 s):
#   HOROVOD_TEST_BIGMEM=1 pytest tests/python -k two_to_the_31
@pytest.mark.skipif(os.environ.get("HOROVOD_TEST_BIGMEM") != "1",
                    reason="needs ~5 GiB free; set HOROVOD_TEST_BIGMEM=1")
def test_tensor_over_two_to_the_31_elements():
    res = horovodrun(2, "big.py", timeout=280)
    assert_ok(res)
    assert res.stdout.count("big OK") == 2


def test_ranks_that_finish_together_over_tcp_log_no_error():
    """Rank 0 may exit as soon as it has sent the shutdown list, while a
    worker's own shutdown request is still on its way: the worker must read
    that list, not report rank 0 as dead. Repeated: the race is narrow."""
    for attempt in range(10):  # about 1 in 4 hit it before the fix
        out = horovodrun(2, "placement.py", env={"HOROVOD_SHM_DISABLE": "1"},
                         timeout=120)
        assert out.returncode == 0, out.stderr
        assert "ERROR" not in out.stderr, (attempt, out.stderr)
