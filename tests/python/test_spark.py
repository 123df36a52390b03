"""horovod.spark.run against a real Spark: a local-cluster application
(a standalone master and two workers, each running one executor JVM with
one core) started by the module's fixture. Functions travel by value
(cloudpickle), so this module need not be importable on the executors."""

import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest

pyspark = pytest.importorskip("pyspark")
psutil = pytest.importorskip("psutil")
import cloudpickle  # noqa: E402

import horovod.spark  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])

_SPARK_ENV = ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "SPARK_WORKER_DIR")


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    saved = {k: os.environ.get(k) for k in _SPARK_ENV}
    work = tmp_path_factory.mktemp("spark")
    os.environ.update({"SPARK_LOCAL_IP": "127.0.0.1",
                       "PYSPARK_PYTHON": sys.executable,
                       "SPARK_WORKER_DIR": str(work / "worker")})
    session = (SparkSession.builder.master("local-cluster[2,1,1024]")
               .appName("horovod-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.local.dir", str(work / "local"))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _collectives(offset):
    import torch

    import horovod.torch as hvd

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    total = hvd.allreduce(torch.tensor([float(r + offset)]), op=hvd.Sum)
    gathered = hvd.allgather(torch.tensor([[r, r]]))
    root = hvd.broadcast(torch.tensor([r * 10 + 7]), root_rank=1)
    split = hvd.alltoall(torch.arange(n) + 100 * r)
    print("rank %d of %d says hello" % (r, n))
    placement = (hvd.local_rank(), hvd.local_size(), hvd.cross_rank(),
                 hvd.cross_size())
    hvd.shutdown()
    return {"rank": r, "size": n, "sum": total.item(),
            "gathered": gathered.tolist(), "root": root.item(),
            "split": split.tolist(), "placement": placement,
            "partition_env": os.environ.get("MY_VAR")}


@pytest.mark.timeout(180)
def test_run_returns_each_ranks_value_in_rank_order(spark):
    out, err = io.StringIO(), io.StringIO()
    results = horovod.spark.run(_collectives, args=(5,), num_proc=2,
                                env={"MY_VAR": "given"}, stdout=out,
                                stderr=err)
    assert [r["rank"] for r in results] == [0, 1]
    for r, res in enumerate(results):
        assert res["size"] == 2
        assert res["sum"] == 0 + 5 + 1 + 5
        assert res["gathered"] == [[0, 0], [1, 1]]
        assert res["root"] == 17
        assert res["split"] == [r, 100 + r]
        # Both executors run on this machine: one host, shared memory.
        assert res["placement"] == (r, 2, 0, 1)
        assert res["partition_env"] == "given"
    lines = out.getvalue().splitlines()
    assert "[0]<stdout>:rank 0 of 2 says hello" in lines, out.getvalue()
    assert "[1]<stdout>:rank 1 of 2 says hello" in lines, out.getvalue()


def _raise_on_rank_1():
    import torch

    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise KeyError("no such thing")
    hvd.allreduce(torch.ones(1))


@pytest.mark.timeout(120)
def test_a_rank_that_raises_fails_the_run_with_its_error(spark):
    err = io.StringIO()
    started = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run(_raise_on_rank_1, num_proc=2, stderr=err)
    assert time.monotonic() - started < 60
    assert str(info.value) == ("horovod.spark.run: rank 1 raised KeyError: "
                               "'no such thing'")
    assert isinstance(info.value.__cause__, KeyError)
    assert "[1]<stderr>:rank 1 raised KeyError" in err.getvalue()


@pytest.mark.timeout(120)
def test_more_ranks_than_task_slots_times_out_naming_the_counts(spark):
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        horovod.spark.run(_collectives, args=(0,), num_proc=3,
                          start_timeout=3)
    assert time.monotonic() - started < 30
    assert str(info.value) == (
        "horovod.spark.run: 0 of 3 tasks started within start_timeout=3s; a "
        "barrier stage needs 3 task slots at once and this Spark application "
        "has 2")
    # The cancelled stage is gone: the next run gets both slots.
    assert [r["rank"] for r in horovod.spark.run(
        _collectives, args=(0,), num_proc=2, stdout=io.StringIO())] == [0, 1]


def test_bad_arguments_are_refused_by_name(spark):
    with pytest.raises(ValueError, match="num_proc=0 is not a positive"):
        horovod.spark.run(_collectives, num_proc=0)
    with pytest.raises(ValueError, match="use_mpi=True is not supported"):
        horovod.spark.run(_collectives, num_proc=2, use_mpi=True)
    with pytest.raises(ValueError, match=r"extra_mpi_args='-x A' is not"):
        horovod.spark.run(_collectives, num_proc=2, extra_mpi_args="-x A")


def test_importing_without_pyspark_names_the_package():
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "try:\n    import horovod.spark\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == ("horovod.spark needs PySpark: pip install "
                                  "pyspark"), out.stderr


def _executors():
    return [p for p in psutil.Process().children(recursive=True)
            if "CoarseGrainedExecutorBackend" in " ".join(p.cmdline())]


def _rank_processes():
    found = []
    for p in psutil.process_iter():
        try:
            if "horovod.runner.run_task" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:
            pass
    return found


def _allreduce_until_killed(flag):
    import torch

    import horovod.torch as hvd

    hvd.init()
    open(flag + str(hvd.rank()), "w").close()
    deadline = time.time() + 90
    while time.time() < deadline:
        hvd.allreduce(torch.ones(1000))
    return "not killed"


@pytest.mark.timeout(240)
def test_an_executor_killed_mid_run_fails_the_run_and_leaves_no_rank(
        spark, tmp_path):
    flag = str(tmp_path / "running")
    killed = {}

    def kill_an_executor_with_a_rank():
        deadline = time.monotonic() + 120
        while not (os.path.exists(flag + "0") and os.path.exists(flag + "1")):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        time.sleep(0.5)
        for p in _executors():
            if any("run_task" in " ".join(c.cmdline())
                   for c in p.children(recursive=True)):
                killed["at"] = time.monotonic()
                p.kill()
                return

    killer = threading.Thread(target=kill_an_executor_with_a_rank)
    killer.start()
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run(_allreduce_until_killed, args=(flag,), num_proc=2,
                          stderr=io.StringIO())
    failed_after = time.monotonic() - killed["at"]
    killer.join()
    print("an executor's death failed the run after %.2f s" % failed_after)
    assert failed_after < 30
    # The rank that died is named, not its peers' errors about it.
    assert re.fullmatch(r"horovod\.spark\.run: rank [01] ended without a "
                        r"result \(its process or executor died: .*\)",
                        str(info.value)), str(info.value)
    deadline = time.monotonic() + 30
    while _rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _rank_processes() == []
    # The master replaces the lost executor; the application works on.
    results = horovod.spark.run(_collectives, args=(0,), num_proc=2,
                                start_timeout=120, stdout=io.StringIO())
    assert [r["sum"] for r in results] == [1.0, 1.0]
