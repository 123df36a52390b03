"""horovodrun's elastic mode across test hosts (tests/multihost/
testhosts.py): horovodrun runs on hvd-h1 and reaches the others over ssh;
workers of workers/elastic_train.py, whose final weights show whether every
sample was trained on exactly once per epoch across resets. Prints the
recovery times docs/elastic.md quotes."""

import os
import signal
import time

import pytest

from conftest import worker
from elastic_job import ElasticJob, discovery
from test_multihost import PY, ROOT, hosts, on_host  # noqa: F401 - fixture

import testhosts

EXAMPLE = os.path.join(ROOT, "examples", "pytorch_elastic_digits.py")


def elastic_on_h1(*flags, command=None):
    argv = [PY, "-m", "horovod.runner"] + [str(f) for f in flags] + \
        (command or [])
    return ElasticJob(testhosts.exec_argv(1, argv, ROOT), cwd=ROOT)


def train(epochs, sleep):
    return [PY, worker("elastic_train.py"), str(epochs), "--sleep", str(sleep)]


def host_of(job, pid):
    return next(r["host"] for r in job.records("START") if r["pid"] == pid)


@pytest.mark.timeout(240)
def test_a_worker_killed_on_a_remote_host_leaves_the_rest_training(hosts):
    job = elastic_on_h1("-np", 4, "--min-np", 2, "-H", "hvd-h1:2,hvd-h2:2",
                        command=train(3, 0.05))
    step = job.wait_record("STEP", lambda r: r["rank"] == 3 and
                           r["epoch"] == 1, timeout=120)
    assert host_of(job, step["pid"]) == "hvd-h2"
    at = time.time()
    os.kill(step["pid"], signal.SIGKILL)
    resumed = job.wait_record("STEP", lambda r: r["size"] == 3 and
                              r["t"] > at)
    assert job.finish(120) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(3)
    print("2 hosts x 2: worker death to training resumed: %.3fs"
          % (resumed["t"] - at))
    assert "host hvd-h2 is blacklisted for the rest of the job" in job.stderr()
    assert "round 2: 3 workers on hvd-h1(2), hvd-h2(1)" in job.stderr()


@pytest.mark.timeout(240)
def test_a_host_added_to_discovery_joins_and_receives_the_state(hosts,
                                                                  tmp_path):
    script, write = discovery(tmp_path, ["hvd-h1:2"])
    job = elastic_on_h1("-np", 2, "--max-np", 4, "--host-discovery-script",
                        script, command=train(4, 0.1))
    job.wait_record("STEP", lambda r: r["epoch"] == 1, timeout=120)
    at = time.time()
    write(["hvd-h1:2", "hvd-h2:2"])
    grown = job.wait_record("STEP", lambda r: r["size"] == 4 and r["t"] > at,
                            timeout=120)
    assert job.finish(120) == 0, job.stderr()[-3000:]
    finals = job.check_trained_exactly(4)
    assert {host_of(job, f["pid"]) for f in finals} == {"hvd-h1", "hvd-h2"}
    new = [r for r in job.records("START") if r["host"] == "hvd-h2"]
    ready = [r for r in job.records("READY")
             if r["pid"] in {n["pid"] for n in new}]
    print("2 hosts x 2: host appeared to its first step: %.3fs (of which "
          "process start to framework imported: %.3fs)"
          % (grown["t"] - at, max(r["t"] for r in ready) -
             min(n["t"] for n in new)))


@pytest.mark.timeout(240)
def test_a_host_taken_away_leaves_the_job_on_the_rest(hosts, tmp_path):
    script, write = discovery(tmp_path, ["hvd-h1:2", "hvd-h2:2"])
    job = elastic_on_h1("-np", 4, "--min-np", 2, "--host-discovery-script",
                        script, command=train(4, 0.1))
    job.wait_record("STEP", lambda r: r["epoch"] == 1 and r["size"] == 4,
                    timeout=120)
    victims = [r["pid"] for r in job.records("START")
               if r["host"] == "hvd-h2"]
    hosts.stop_sshd(2)
    try:
        at = time.time()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        resumed = job.wait_record("STEP", lambda r: r["size"] == 2 and
                                  r["t"] > at)
        assert job.finish(120) == 0, job.stderr()[-3000:]
    finally:
        hosts.start_sshd(2)
    job.check_trained_exactly(2)
    print("2 hosts x 2: host lost to training resumed: %.3fs"
          % (resumed["t"] - at))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_host_that_keeps_failing_is_blacklisted_then_readmitted(hosts,
                                                                  tmp_path):
    # hvd-h2 refuses ssh: each try fails and its cooldown doubles (1 s,
    # 2 s); once it answers again it joins the job.
    hosts.stop_sshd(2)
    script, write = discovery(tmp_path, ["hvd-h1:2"])
    try:
        job = elastic_on_h1("-np", 2, "--max-np", 4, "--host-discovery-script",
                            script, "--blacklist-cooldown-range", 1, 2,
                            command=train(12, 0.1))
        job.wait_record("STEP", lambda r: r["epoch"] == 1, timeout=120)
        write(["hvd-h1:2", "hvd-h2:2"])
        job.wait_err("host hvd-h2 is blacklisted for 1s", timeout=60)
        job.wait_err("host hvd-h2 is blacklisted for 2s", timeout=60)
    finally:
        hosts.start_sshd(2)
    job.wait_err("host hvd-h2 is back after its cooldown", timeout=60)
    job.wait_record("STEP", lambda r: r["size"] == 4, timeout=120)
    assert job.finish(180) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(4)


@pytest.mark.timeout(300)
def test_the_elastic_example_runs_with_a_discovery_script(hosts, tmp_path):
    script, write = discovery(tmp_path, ["hvd-h1:2", "hvd-h2:2"])
    job = elastic_on_h1("-np", 4, "--min-np", 2, "--host-discovery-script",
                        script, command=[PY, EXAMPLE, "--epochs", "6"])
    assert job.finish(240) == 0, job.stderr()[-3000:]
    final = [l for l in job.out if "final test accuracy" in l]
    assert len(final) == 1, job.out[-20:]
    assert float(final[0].split("accuracy: ")[1].split()[0]) > 0.9, final
