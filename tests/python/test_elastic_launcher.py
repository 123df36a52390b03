"""horovodrun's elastic mode on this host: workers of
workers/elastic_train.py, whose final weights show whether every sample
was trained on exactly once per epoch across resets. The same across
test hosts is in test_elastic_hosts.py."""

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import process_alive, worker
from elastic_job import ElasticJob, discovery

RUNNER = [sys.executable, "-m", "horovod.runner"]
TRAIN = [sys.executable, worker("elastic_train.py")]


def elastic(*flags, epochs=3, sleep=0.05, extra=()):
    return ElasticJob(RUNNER + [str(f) for f in flags] + TRAIN +
                      [str(epochs), "--sleep", str(sleep)] + list(extra))


def kill_rank(job, rank, epoch=1):
    """SIGKILLs the worker at `rank` once it trains in `epoch`; returns
    when."""
    step = job.wait_record("STEP", lambda r: r["rank"] == rank and
                           r["epoch"] == epoch)
    at = time.time()
    os.kill(step["pid"], signal.SIGKILL)
    return at


def resumed_after(job, at, size):
    return job.wait_record("STEP", lambda r: r["size"] == size and r["t"] > at)


@pytest.mark.timeout(120)
def test_a_killed_worker_leaves_the_rest_training_from_the_last_commit():
    job = elastic("-np", 3, "--min-np", 2, "-H", "localhost:3")
    at = kill_rank(job, 2)
    step = resumed_after(job, at, 2)
    assert job.finish(90) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(2)
    print("worker death to training resumed: %.3fs" % (step["t"] - at))
    assert "exited with code -9; host localhost is blacklisted for the rest " \
        "of the job" in job.stderr()
    assert len(job.records("RESET")) == 2


@pytest.mark.timeout(120)
def test_a_blacklisted_host_is_readmitted_after_its_cooldown():
    job = elastic("-np", 3, "--min-np", 2, "-H", "localhost:3",
                  "--blacklist-cooldown-range", 1, 8, epochs=6, sleep=0.1)
    at = kill_rank(job, 1)
    job.wait_err("host localhost is blacklisted for 1s")
    job.wait_err("host localhost is back after its cooldown")
    grown = resumed_after(job, at, 3)
    assert job.finish(90) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(3)
    assert grown["t"] - at >= 1.0
    rounds = [l for l in job.err if "horovodrun: round" in l]
    assert [l.split(": ")[2] for l in rounds] == [
        "3 workers on localhost(3)", "2 workers on localhost(2)",
        "3 workers on localhost(3)"], rounds


@pytest.mark.timeout(120)
def test_a_discovered_host_joins_at_the_next_commit_and_gets_the_state(
        tmp_path):
    # Each step also averages a metric unnamed: the worker that joins
    # numbers it as the first one does.
    script, write = discovery(tmp_path, ["localhost:1"])
    job = elastic("-np", 1, "--max-np", 2, "--host-discovery-script", script,
                  epochs=4, sleep=0.1, extra=["--metric"])
    job.wait_record("STEP", lambda r: r["epoch"] == 1)
    at = time.time()
    write(["localhost:2"])
    grown = resumed_after(job, at, 2)
    assert job.finish(90) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(2)
    ready = [r for r in job.records("READY") if r["t"] > at]
    started = [r for r in job.records("START") if r["t"] > at]
    print("host appeared to first step: %.3fs (process start to framework "
          "imported: %.3fs)" % (grown["t"] - at, ready[0]["t"] - started[0]["t"]))


@pytest.mark.timeout(120)
def test_a_slot_gone_from_discovery_makes_its_worker_leave_cleanly(tmp_path):
    script, write = discovery(tmp_path, ["localhost:2"])
    job = elastic("-np", 2, "--min-np", 1, "--host-discovery-script", script,
                  epochs=4, sleep=0.1)
    job.wait_record("STEP", lambda r: r["epoch"] == 1)
    at = time.time()
    write(["localhost:1"])
    shrunk = resumed_after(job, at, 1)
    assert job.finish(90) == 0, job.stderr()[-3000:]
    job.check_trained_exactly(1)
    assert "horovod: this worker leaves the job: slot localhost:1 is no " \
        "longer part of the job" in job.stderr()
    assert "exited with code" not in job.stderr()
    print("slot withdrawn to training resumed without it: %.3fs"
          % (shrunk["t"] - at))


@pytest.mark.timeout(120)
def test_reaching_the_reset_limit_fails_the_job_saying_so():
    job = elastic("-np", 3, "--min-np", 2, "-H", "localhost:3",
                  "--reset-limit", 0)
    kill_rank(job, 2)
    assert job.finish(60) == 1
    assert "horovodrun: job failed: the job re-formed 1 times, more than " \
        "--reset-limit 0" in job.stderr(), job.stderr()[-3000:]


@pytest.mark.timeout(60)
def test_too_few_slots_fail_at_once():
    t0 = time.monotonic()
    job = elastic("-np", 3, "--min-np", 2, "-H", "localhost:2")
    assert job.finish(50) == 1
    assert time.monotonic() - t0 < 30
    assert "horovodrun: job failed: only 2 of the 3 workers needed (-np) " \
        "were available, and no more can start" in job.stderr(), \
        job.stderr()[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig,said", [
    ("SIGINT", "interrupted"), ("SIGTERM", "stopped by SIGTERM")])
def test_ctrl_c_stops_every_worker(sig, said):
    sig = getattr(signal, sig)
    job = elastic("-np", 2, "--min-np", 1, "-H", "localhost:2", epochs=50,
                  sleep=0.1)
    job.wait_record("STEP", lambda r: r["size"] == 2)
    pids = {r["pid"] for r in job.records("START")}
    job.proc.send_signal(sig)
    assert job.finish(60) == 128 + sig
    assert "horovodrun: %s; every worker stopped" % said in job.stderr()
    for pid in pids:
        assert not process_alive(pid), pid


@pytest.mark.parametrize("flags,message", [
    (["-np", "2", "--min-np", "3"], "-np 2 is below --min-np 3"),
    (["-np", "4", "--max-np", "3"], "--max-np 3 is below -np 4"),
    (["--max-np", "3"], "elastic mode needs -np or --min-np"),
    (["-np", "1", "--min-np", "1", "--blacklist-cooldown-range", "5", "1"],
     "--blacklist-cooldown-range needs 0 <= MIN <= MAX, not 5 1"),
    (["-np", "1", "--min-np", "1", "--mpi"],
     "elastic mode starts its workers itself; it cannot run through --mpi"),
])
def test_bad_elastic_flags_are_one_line(flags, message):
    out = subprocess.run(RUNNER + flags + ["true"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["horovodrun: " + message], \
        out.stderr


def test_a_failing_discovery_script_is_named(tmp_path):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho no inventory today >&2\nexit 4\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    out = subprocess.run(RUNNER + ["-np", "1", "--host-discovery-script",
                                   str(script), "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "horovodrun: host discovery script %s exited with code 4: no "
        "inventory today" % script], out.stderr


@pytest.mark.timeout(240)
@pytest.mark.parametrize("backend", [
    "tensorflow", pytest.param("torch", marks=pytest.mark.slow),
    pytest.param("jax", marks=pytest.mark.slow)])
def test_a_keras_job_survives_a_killed_worker(backend):
    pytest.importorskip("keras")
    pytest.importorskip(backend)
    job = ElasticJob(RUNNER + ["-np", "3", "--min-np", "2", "-H",
                               "localhost:3", sys.executable,
                               worker("keras_elastic_train.py"), "6",
                               "--sleep", "0.05"],
                     env=dict(os.environ, KERAS_BACKEND=backend))
    at = kill_rank(job, 2)
    resumed_after(job, at, 2)
    assert job.finish(180) == 0, job.stderr()[-3000:]
    finals = job.records("FINAL")
    assert len(finals) == 2 and all(f["ok"] == 1 for f in finals), finals
