"""horovod.ray's RayExecutor against a real Ray: a local cluster started by
the module's fixture (`ray.init(num_cpus=2)`). Functions travel by value,
so this module need not be importable in Ray's workers."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")
import ray.cloudpickle  # noqa: E402

import cluster_jobs  # noqa: E402
from cluster_jobs import (allreduce_until_killed, check_collectives,  # noqa: E402
                          collectives, command_has, elastic_training,
                          example_accuracy, raise_on_rank_1, ranks_running)

from horovod.ray import RayExecutor  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(cluster_jobs)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def executor(cluster):
    made = []

    def make(**kw):
        ex = RayExecutor(RayExecutor.create_settings(timeout_s=30), **kw)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.shutdown()


@pytest.mark.timeout(120)
def test_run_returns_each_ranks_value_in_rank_order(executor):
    ex = executor(num_workers=2)
    ex.start(extra_env_vars={"MY_VAR": "given"})
    for offset in (5, 7):  # the same actors, the same job, twice
        results = ex.run(collectives, args=(offset,))
        check_collectives(results, offset)
        assert [r["my_var"] for r in results] == ["given", "given"]
    refs = ex.run_remote(collectives, kwargs={"offset": 1})
    assert [v["sum"] for v in ray.get(refs, timeout=60)] == [3.0, 3.0]


class _Counter:
    def __init__(self, start):
        self.value = start

    def bump(self):
        import horovod.torch as hvd
        import torch

        hvd.init()
        self.value += 1
        return hvd.allreduce(torch.tensor([float(self.value)]),
                             op=hvd.Sum).item()


@pytest.mark.timeout(120)
def test_execute_hands_each_rank_its_executable(executor):
    ex = executor(num_hosts=1, num_workers_per_host=2)
    ex.start(executable_cls=_Counter, executable_args=(10,))
    assert ex.execute(lambda c: c.bump()) == [22.0, 22.0]
    assert ex.execute(lambda c: c.bump()) == [24.0, 24.0]
    assert ex.execute_single(lambda c: c.value) == 12


@pytest.mark.timeout(120)
def test_a_rank_that_raises_fails_run_with_its_error(executor):
    ex = executor(num_workers=2)
    ex.start()
    started = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        ex.run(raise_on_rank_1)
    assert time.monotonic() - started < 60
    assert str(info.value) == ("RayExecutor.run: rank 1 raised KeyError: "
                               "'no such thing'")
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.timeout(180)
def test_a_worker_killed_mid_run_fails_run_naming_its_rank(executor,
                                                           tmp_path):
    ex = executor(num_workers=2)
    ex.start()
    pids = ex.execute(lambda _: os.getpid())
    flag = str(tmp_path / "running")
    outcome = {}

    def run():
        try:
            ex.run(allreduce_until_killed, args=(flag,))
        except RuntimeError as e:
            outcome["error"], outcome["at"] = e, time.monotonic()

    runner = threading.Thread(target=run)
    runner.start()
    assert ranks_running(flag, (0, 1), 60), "the ranks never started"
    killed_at = time.monotonic()
    os.kill(pids[1], signal.SIGKILL)
    runner.join(60)
    failed_after = outcome["at"] - killed_at
    print("a killed worker failed the run after %.2f s" % failed_after)
    assert failed_after < 30
    assert str(outcome["error"]).startswith(
        "RayExecutor.run: rank 1's worker (on %s) died: "
        % socket.gethostname()), str(outcome["error"])
    # The survivor's collective failed too (within the engine's bounds)
    # instead of hanging on: rank 0 is free for the next call.
    with pytest.raises(RuntimeError, match="rank 0 raised "
                       "HorovodInternalError"):
        ex.execute_single(lambda _: __import__("horovod.torch").torch
                          .allreduce(__import__("torch").ones(1)))
    # Shutting down frees the resources for a new executor.
    ex.shutdown()
    again = executor(num_workers=2)
    again.start()
    assert [r["sum"] for r in again.run(collectives, args=(0,))] == [1.0,
                                                                      1.0]


@pytest.mark.timeout(120)
def test_more_workers_than_the_cluster_has_times_out_naming_them(cluster):
    ex = RayExecutor(RayExecutor.create_settings(
        placement_group_timeout_s=2), num_workers=3)
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        ex.start()
    assert time.monotonic() - started < 30
    assert str(info.value).startswith(
        "RayExecutor: the cluster did not grant 3 x {'CPU': 1} (PACK) within "
        "placement_group_timeout_s=2s; it has "), str(info.value)
    assert ex.workers == []


def test_bad_arguments_are_refused_by_name():
    settings = RayExecutor.create_settings()
    assert "key" not in repr(settings) and settings.key not in repr(settings)
    with pytest.raises(ValueError, match="give num_workers or num_hosts"):
        RayExecutor(settings)
    with pytest.raises(ValueError, match="not both"):
        RayExecutor(settings, num_workers=2, num_hosts=1)
    with pytest.raises(ValueError, match=r"num_workers=-1 is not a positive"):
        RayExecutor(settings, num_workers=-1, num_hosts=None)
    with pytest.raises(ValueError, match=r"gpus_per_worker=1 needs use_gpu"):
        RayExecutor(settings, num_workers=1, gpus_per_worker=1)
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        RayExecutor(settings, num_workers=1).run(print)
    with pytest.raises(ValueError, match="RayExecutor: timeout_s must be a "
                                         "positive number of seconds, not 0"):
        RayExecutor.create_settings(timeout_s=0)
    with pytest.raises(ValueError, match="placement_group_timeout_s must be "
                                         "a positive number of seconds, not "
                                         "'100'"):
        RayExecutor.create_settings(placement_group_timeout_s="100")


def test_importing_without_ray_names_the_package():
    code = ("import sys; sys.modules['ray'] = None\n"
            "try:\n    import horovod.ray\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "horovod.ray needs Ray: pip install ray", \
        out.stderr


@pytest.mark.timeout(300)
def test_ray_digits_example_trains_through_the_executor():
    assert example_accuracy("ray_digits.py") > 0.9


@pytest.mark.timeout(240)
def test_elastic_executor_goes_on_when_a_worker_dies(cluster, tmp_path):
    from horovod.ray import ElasticRayExecutor

    settings = ElasticRayExecutor.create_settings(min_np=1, max_np=2,
                                                  elastic_timeout=60)
    assert settings.key not in repr(settings)
    ex = ElasticRayExecutor(settings, cpus_per_slot=1)
    ex.start()
    flag = str(tmp_path / "step")
    outcome = {}

    def run():
        outcome["results"] = ex.run(lambda: elastic_training(flag, 150))

    runner = threading.Thread(target=run)
    runner.start()
    assert ranks_running(flag, (0, 1), 90), "two workers never trained"
    workers = [p for p in psutil.process_iter()
               if command_has(p, "ElasticWorker")]
    assert len(workers) == 2, [p.cmdline() for p in workers]
    workers[1].kill()
    runner.join(180)
    results = outcome["results"]
    # One worker finished the job, alone in the last round.
    assert len(results) == 1, results
    steps, total, size, sizes = results[0]
    assert steps == 150 and size == 1
    assert total == sum(range(150))  # every step counted once
    assert sizes[0] == 2 and sizes[-1] == 1


def test_elastic_settings_are_checked_by_name():
    from horovod.ray import ElasticRayExecutor

    with pytest.raises(ValueError, match="min_np=0 is not a positive"):
        ElasticRayExecutor.create_settings(min_np=0)
    with pytest.raises(ValueError, match="max_np=1 is below min_np=2"):
        ElasticRayExecutor.create_settings(min_np=2, max_np=1)
    with pytest.raises(ValueError, match="elastic_timeout must be a positive "
                                         "number of seconds, not -1"):
        ElasticRayExecutor.create_settings(elastic_timeout=-1)
    with pytest.raises(RuntimeError, match=r"call start\(\) first"):
        ElasticRayExecutor(ElasticRayExecutor.create_settings()).run(print)
