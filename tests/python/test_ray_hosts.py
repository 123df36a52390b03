"""RayExecutor on a Ray cluster of two hosts: a head on test host hvd-h1
and a second node on hvd-h2 (tests/multihost/testhosts.py: network
namespaces, each with its own address, hostname and /dev/shm), with a
driver on hvd-h1 as a user of that cluster runs one. Ray's token
authentication is on (RAY_AUTH_MODE=token; the hosts share root's token
file)."""

import json
import os

import pytest

from test_multihost import PY, ROOT, hosts, on_host  # noqa: F401 - fixture

import testhosts

pytest.importorskip("ray")

PORT = 6390
HEAD = testhosts.host_addr(1)

DRIVER = r'''
import json, os, signal, sys, threading, time
import ray
from horovod.ray import RayExecutor

ray.init(address="%(head)s:%(port)d")

def collectives():
    import socket, torch
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
    gathered = hvd.allgather(torch.tensor([hvd.rank()]))
    return {"rank": hvd.rank(), "host": socket.gethostname(),
            "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
            "cross_size": hvd.cross_size(), "sum": total.item(),
            "gathered": gathered.tolist()}

def allreduce_forever(flag):
    import torch
    import horovod.torch as hvd
    hvd.init()
    open(flag + str(hvd.rank()), "w").close()
    deadline = time.time() + 90
    while time.time() < deadline:
        hvd.allreduce(torch.ones(1000))

ex = RayExecutor(RayExecutor.create_settings(timeout_s=30),
                 num_hosts=2, num_workers_per_host=%(per_host)d)
started = time.monotonic()
ex.start()
print("RESULTS " + json.dumps(ex.run(collectives)), flush=True)
print("START %%.3f" %% (time.monotonic() - started), flush=True)
if sys.argv[1] == "kill":
    where = ex.execute(lambda _: (os.getpid(), __import__("socket").gethostname()))
    victim = next(r for r, (_, h) in enumerate(where) if h == "hvd-h2")
    flag = sys.argv[2]
    outcome = {}
    def run():
        try:
            ex.run(allreduce_forever, args=(flag,))
        except RuntimeError as e:
            outcome["error"], outcome["at"] = str(e), time.monotonic()
    t = threading.Thread(target=run)
    t.start()
    while not all(os.path.exists(flag + str(r)) for r in range(len(where))):
        time.sleep(0.05)
    killed = time.monotonic()
    os.kill(where[victim][0], signal.SIGKILL)
    t.join(60)
    print("KILLED " + json.dumps({"victim": victim, "error": outcome["error"],
                                  "after": outcome["at"] - killed}), flush=True)
ex.shutdown()
'''


@pytest.fixture(scope="module")
def cluster(hosts):  # noqa: F811 - the imported fixture
    env = ["env", "RAY_AUTH_MODE=token"]
    start = [os.path.join(os.path.dirname(PY), "ray"), "start",
             "--num-cpus", "2", "--disable-usage-stats"]
    try:
        out = on_host(1, env + start + [
            "--head", "--port", str(PORT), "--node-ip-address", HEAD,
            "--include-dashboard", "false", "--temp-dir", "/tmp/ray-hvd-h1"])
        assert out.returncode == 0, out.stderr[-3000:]
        out = on_host(2, env + start + [
            "--address", "%s:%d" % (HEAD, PORT), "--node-ip-address",
            testhosts.host_addr(2), "--temp-dir", "/tmp/ray-hvd-h2"])
        assert out.returncode == 0, out.stderr[-3000:]
        yield
    finally:
        testhosts.kill_matching((1, 2), "ray")


def _driver(tmp_path, *args, per_host=1):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER % {"head": HEAD, "port": PORT,
                                "per_host": per_host})
    out = on_host(1, ["env", "RAY_AUTH_MODE=token", PY, str(script)] +
                  [str(a) for a in args], timeout=200)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = {l.split(" ", 1)[0]: l.split(" ", 1)[1]
             for l in out.stdout.splitlines()
             if l.split(" ", 1)[0] in ("RESULTS", "START", "KILLED")}
    return lines


@pytest.mark.timeout(240)
def test_ranks_on_two_ray_nodes_run_collectives_across_hosts(cluster,
                                                             tmp_path):
    lines = _driver(tmp_path, "plain", per_host=2)
    results = json.loads(lines["RESULTS"])
    print("start() took %s s" % lines["START"])
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    # Ranks are numbered host by host: each host's two are contiguous.
    assert results[0]["host"] == results[1]["host"] != results[2]["host"] \
        == results[3]["host"]
    assert {r["host"] for r in results} == {"hvd-h1", "hvd-h2"}
    for r in results:
        assert r["local_size"] == 2 and r["cross_size"] == 2
        assert r["cross_rank"] == r["rank"] // 2
        assert r["sum"] == 10.0 and r["gathered"] == [0, 1, 2, 3]


@pytest.mark.timeout(240)
def test_a_worker_killed_on_the_other_node_fails_run_naming_it(cluster,
                                                               tmp_path):
    lines = _driver(tmp_path, "kill", tmp_path / "running")
    killed = json.loads(lines["KILLED"])
    print("a killed remote worker failed the run after %.2f s"
          % killed["after"])
    assert killed["error"].startswith(
        "RayExecutor.run: rank %d's worker (on hvd-h2) died: "
        % killed["victim"]), killed["error"]
    assert killed["after"] < 30
