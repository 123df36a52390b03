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

import cluster_jobs  # noqa: E402
from cluster_jobs import (allreduce_until_killed, check_collectives,  # noqa: E402
                          collectives, command_has, elastic_training,
                          example_accuracy, job_size, raise_on_rank_1,
                          ranks_running)

import horovod.spark  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(cluster_jobs)

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


@pytest.mark.timeout(180)
def test_run_returns_each_ranks_value_in_rank_order(spark):
    out, err = io.StringIO(), io.StringIO()
    results = horovod.spark.run(collectives, args=(5,), num_proc=2,
                                env={"MY_VAR": "given"}, stdout=out,
                                stderr=err)
    check_collectives(results, 5)
    assert [r["my_var"] for r in results] == ["given", "given"]
    lines = out.getvalue().splitlines()
    assert "[0]<stdout>:rank 0 of 2 says hello" in lines, out.getvalue()
    assert "[1]<stdout>:rank 1 of 2 says hello" in lines, out.getvalue()


@pytest.mark.timeout(120)
def test_a_rank_that_raises_fails_the_run_with_its_error(spark):
    err = io.StringIO()
    started = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run(raise_on_rank_1, num_proc=2, stderr=err)
    assert time.monotonic() - started < 60
    assert str(info.value) == ("horovod.spark.run: rank 1 raised KeyError: "
                               "'no such thing'")
    assert isinstance(info.value.__cause__, KeyError)
    assert "[1]<stderr>:rank 1 raised KeyError" in err.getvalue()


@pytest.mark.timeout(120)
def test_more_ranks_than_task_slots_times_out_naming_the_counts(spark):
    started = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        horovod.spark.run(collectives, args=(0,), num_proc=3,
                          start_timeout=3)
    assert time.monotonic() - started < 30
    assert str(info.value) == (
        "horovod.spark.run: 0 of 3 tasks started within start_timeout=3s; a "
        "barrier stage needs 3 task slots at once and this Spark application "
        "has 2")
    # The cancelled stage is gone: the next run gets both slots.
    assert [r["rank"] for r in horovod.spark.run(
        collectives, args=(0,), num_proc=2, stdout=io.StringIO())] == [0, 1]


def test_bad_arguments_are_refused_by_name(spark):
    with pytest.raises(ValueError, match="num_proc=0 is not a positive"):
        horovod.spark.run(collectives, num_proc=0)
    with pytest.raises(ValueError, match="use_mpi=True is not supported"):
        horovod.spark.run(collectives, num_proc=2, use_mpi=True)
    with pytest.raises(ValueError, match=r"extra_mpi_args='-x A' is not"):
        horovod.spark.run(collectives, num_proc=2, extra_mpi_args="-x A")
    with pytest.raises(ValueError, match="horovod.spark.run: start_timeout "
                                         "must be a positive number of "
                                         "seconds, not 0"):
        horovod.spark.run(collectives, num_proc=2, start_timeout=0)
    with pytest.raises(TypeError, match="horovod.spark.run: args must be a "
                                        "tuple or list"):
        horovod.spark.run(collectives, args=0, num_proc=2)
    os.environ["HOROVOD_SPARK_START_TIMEOUT"] = "soon"
    try:
        with pytest.raises(ValueError, match="HOROVOD_SPARK_START_TIMEOUT="
                                             "'soon' is not a number"):
            horovod.spark.run(collectives, num_proc=2)
    finally:
        del os.environ["HOROVOD_SPARK_START_TIMEOUT"]


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
            if command_has(p, "CoarseGrainedExecutorBackend")]


def _rank_processes():
    return [p for p in psutil.process_iter()
            if command_has(p, "horovod.runner.run_task")]


@pytest.mark.timeout(240)
def test_an_executor_killed_mid_run_fails_the_run_and_leaves_no_rank(
        spark, tmp_path):
    flag = str(tmp_path / "running")
    killed = {}

    def kill_an_executor_with_a_rank():
        if not ranks_running(flag, (0, 1), 120):
            return
        time.sleep(0.5)
        for p in _executors():
            if any(command_has(c, "run_task")
                   for c in p.children(recursive=True)):
                killed["at"] = time.monotonic()
                p.kill()
                return

    killer = threading.Thread(target=kill_an_executor_with_a_rank)
    killer.start()
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run(allreduce_until_killed, args=(flag,), num_proc=2,
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
    results = horovod.spark.run(collectives, args=(0,), num_proc=2,
                                start_timeout=120, stdout=io.StringIO())
    assert [r["sum"] for r in results] == [1.0, 1.0]


# ----- run_elastic ----------------------------------------------------------


def _no_rank_left(timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while _rank_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    return _rank_processes() == []


def _wait_for(condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.timeout(240)
def test_run_elastic_returns_the_last_rounds_values(spark, tmp_path):
    flag = str(tmp_path / "step")
    # A third slot has no task slot to run in: the job goes on without it,
    # and its task, still waiting, is cancelled at the end.
    results = horovod.spark.run_elastic(elastic_training, args=(flag, 40),
                                        num_proc=2, max_num_proc=3, verbose=0,
                                        stdout=io.StringIO(),
                                        stderr=io.StringIO())
    assert len(results) == 2
    for steps, total, size, sizes in results:
        assert (steps, total, size) == (40, sum(range(40)), 2)
        assert set(sizes) == {2}
    assert _no_rank_left()


@pytest.mark.timeout(300)
def test_run_elastic_goes_on_without_a_lost_executor_and_grows_back(
        spark, tmp_path, capsys):
    flag, stop = str(tmp_path / "step"), str(tmp_path / "stop")
    outcome = {}

    def run():
        try:
            outcome["results"] = horovod.spark.run_elastic(
                elastic_training, args=(flag, 100000, stop), num_proc=2,
                min_num_proc=1, elastic_timeout=120, stdout=io.StringIO(),
                stderr=io.StringIO())
        except BaseException as e:  # noqa: B902 - reported by the test
            outcome["error"] = e

    job = threading.Thread(target=run)
    job.start()
    try:
        assert ranks_running(flag, (0, 1), 120), outcome
        assert _wait_for(lambda: job_size(flag) == 2, 30)
        victim = next(p for p in _executors()
                      if any(command_has(c, "run_task")
                             for c in p.children(recursive=True)))
        victim.kill()
        killed_at = time.monotonic()
        assert _wait_for(lambda: job_size(flag) == 1, 60), outcome
        shrunk_after = time.monotonic() - killed_at
        # The master starts a new executor, Spark retries the lost slot's
        # task there, and its new worker joins at the next commit.
        assert _wait_for(lambda: job_size(flag) == 2, 180), outcome
        grown_after = time.monotonic() - killed_at
    finally:
        open(stop, "w").close()
        job.join(120)
    results = outcome["results"]
    assert len(results) == 2
    steps, total, _, sizes = results[0]
    assert all(r[0] == steps and r[1] == total for r in results)
    assert total == sum(range(steps))  # every step counted once
    assert sizes[0] == 2 and 1 in sizes and sizes[-1] == 2
    err = capsys.readouterr().err
    assert "is gone with its slot (the Spark task of slot" in err, err
    with capsys.disabled():
        print("run_elastic: an executor's death shrank the job after %.2f s; "
              "its slot's new worker joined after %.2f s"
              % (shrunk_after, grown_after))
    assert "blacklisted" not in err, err
    assert _no_rank_left()


@pytest.mark.timeout(180)
def test_run_elastic_fails_when_its_workers_raise(spark):
    started = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run_elastic(raise_on_rank_1, num_proc=2, verbose=0,
                                  stdout=io.StringIO(), stderr=io.StringIO())
    assert time.monotonic() - started < 60
    assert re.match(r"horovod\.spark\.run_elastic: the job failed: (only 1 "
                    r"of the 2 workers needed \(min_num_proc\) were "
                    r"available, and no more can start|no host is left)",
                    str(info.value)), str(info.value)
    assert isinstance(info.value.__cause__, KeyError)
    assert _no_rank_left()


@pytest.mark.timeout(120)
def test_run_elastic_with_too_few_slots_fails_after_start_timeout(spark):
    with pytest.raises(RuntimeError) as info:
        horovod.spark.run_elastic(collectives, args=(0,), num_proc=3,
                                  start_timeout=3, verbose=0)
    assert re.fullmatch(r"horovod\.spark\.run_elastic: the job failed: only "
                        r"2 of the 3 workers needed \(num_proc\) were "
                        r"available for [0-9.]+s \(start_timeout\)",
                        str(info.value)), str(info.value)
    assert _no_rank_left()


_LOCAL_STAGE_FAILS = r'''
import os, sys, time
from pyspark.sql import SparkSession
import horovod.spark

spark = (SparkSession.builder.master("local[2]")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("OFF")

def train():
    import torch
    import horovod.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(step=0)

    @hvd.elastic.run
    def loop(state):
        while True:
            hvd.allreduce(torch.ones(1))
            state.commit()
            time.sleep(0.02)

    return loop(state)

try:
    horovod.spark.run_elastic(train, num_proc=2, min_num_proc=1, verbose=0)
except RuntimeError as e:
    print("ERROR " + str(e).splitlines()[0], flush=True)
spark.stop()
'''


@pytest.mark.timeout(180)
def test_run_elastic_fails_with_its_stage_naming_sparks_error(tmp_path):
    # In local[N] mode Spark tries a task once: a slot agent's Python
    # worker that dies fails the stage, and with it the job.
    script = tmp_path / "stage.py"
    script.write_text(_LOCAL_STAGE_FAILS)
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable)
    job = subprocess.Popen([sys.executable, str(script)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 120
        workers = []
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = [p for p in psutil.Process(job.pid).children(
                recursive=True) if command_has(p, "horovod.runner.run_task")]
            time.sleep(0.2)
        assert len(workers) == 2, "the workers never started"
        time.sleep(2)  # training
        workers[0].parent().kill()  # the agent's Python worker
        out, err = job.communicate(timeout=120)
    finally:
        job.kill()
    lines = [l for l in out.splitlines() if l.startswith("ERROR ")]
    # Spark's own words, not Py4J's "An error occurred while calling".
    assert lines and re.match(
        r"ERROR horovod\.spark\.run_elastic: the job failed: the Spark job "
        r"failed: org\.apache\.spark\.SparkException: Job aborted due to "
        r"stage failure", lines[0]), out + err[-3000:]


def test_run_elastic_refuses_bad_sizes_by_name(spark):
    run = horovod.spark.run_elastic
    with pytest.raises(ValueError, match="num_proc=0 is not a positive"):
        run(collectives, num_proc=0)
    with pytest.raises(ValueError, match="needs min_num_proc <= num_proc <= "
                                         "max_num_proc, not 3, 2, 2"):
        run(collectives, num_proc=2, min_num_proc=3)
    with pytest.raises(ValueError, match="not 1, 2, 1"):
        run(collectives, num_proc=2, min_num_proc=1, max_num_proc=1)
    with pytest.raises(ValueError, match="max_num_proc=4 and max_np=3 "
                                         "disagree"):
        run(collectives, max_num_proc=4, max_np=3)
    with pytest.raises(ValueError, match="horovod.spark.run_elastic: "
                                         "elastic_timeout must be a positive "
                                         "number of seconds, not -1"):
        run(collectives, num_proc=2, elastic_timeout=-1)
    with pytest.raises(TypeError, match="horovod.spark.run_elastic: func "
                                        "must be callable, got str"):
        run("collectives", num_proc=2)


# ----- Estimators -----------------------------------------------------------


def _digits_frame(spark, vectors=False):
    from pyspark.ml.linalg import Vectors
    from sklearn.datasets import load_digits

    d = load_digits()
    rows = [((Vectors.dense(d.data[i] / 16.0) if vectors
              else (d.data[i] / 16.0).tolist()), int(d.target[i]), i % 5 == 0)
            for i in range(len(d.target))]
    return spark.createDataFrame(rows, ["features", "label", "is_val"])


def _accuracy(model, df):
    import numpy as np

    out = model.transform(df.where("is_val")).toPandas()
    predicted = np.stack(out["label__output"].to_numpy()).argmax(1)
    return (predicted == out["label"].to_numpy()).mean(), out


class _Classifier:
    """A module-level factory, so the class pickles by value with this
    module."""

    @staticmethod
    def make():
        import torch

        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, 10))


@pytest.mark.timeout(240)
def test_torch_estimator_fits_digits_and_its_model_predicts(spark, tmp_path):
    import torch

    from horovod.spark.common.store import Store
    from horovod.spark.torch import TorchEstimator, TorchModel

    model = _Classifier.make()
    store = Store.create(str(tmp_path / "store"))
    est = TorchEstimator(
        num_proc=2, model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss=torch.nn.functional.cross_entropy, store=store,
        feature_cols=["features"], label_cols=["label"], batch_size=32,
        epochs=8, validation="is_val", random_seed=1, run_id="digits",
        verbose=0)
    assert est.getEpochs() == 8 and est.setEpochs(10) is est
    df = _digits_frame(spark)
    fitted = est.fit(df)
    assert isinstance(fitted, TorchModel)
    history = fitted.getHistory()
    assert len(history["loss"]) == len(history["val_loss"]) == 10
    assert history["loss"][-1] < history["loss"][0] / 4, history
    # The driver's module was not trained: the fitted one is a copy.
    assert not torch.equal(model[0].weight, fitted.getModel()[0].weight)
    accuracy, out = _accuracy(fitted, df)
    assert accuracy > 0.9, accuracy
    assert list(out.columns) == ["features", "label", "is_val",
                                 "label__output"]
    assert os.path.exists(store.get_checkpoint_path("digits"))
    assert os.path.exists(os.path.join(store.get_logs_path("digits"),
                                       "history.json"))
    # Each rank read its own half of the training rows.
    assert len(os.listdir(store.get_train_data_path("digits"))) >= 2


@pytest.mark.timeout(300)
def test_keras_estimator_fits_digits_from_vectors(spark, tmp_path):
    keras = pytest.importorskip("keras")

    from horovod.spark.common.store import LocalStore
    from horovod.spark.keras import KerasEstimator

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10)])
    est = KerasEstimator(
        num_proc=2, model=model, optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"], store=LocalStore(str(tmp_path / "store")),
        feature_cols=["features"], label_cols=["label"], batch_size=32,
        epochs=5, validation=0.2, random_seed=1, verbose=0)
    df = _digits_frame(spark, vectors=True)
    fitted = est.fit(df)
    history = fitted.getHistory()
    assert len(history["loss"]) == 5 and len(history["val_accuracy"]) == 5
    accuracy, _ = _accuracy(fitted, df)
    assert accuracy > 0.85, (accuracy, history)


def test_estimator_parameters_are_checked_by_name(spark, tmp_path):
    from horovod.spark.common.store import LocalStore
    from horovod.spark.torch import TorchEstimator

    with pytest.raises(TypeError, match="unknown parameter.s. epoch;"):
        TorchEstimator(epoch=3)
    df = _digits_frame(spark)
    base = dict(model=object(), optimizer=object(), loss=object(),
                store=LocalStore(str(tmp_path)), feature_cols=["features"],
                label_cols=["label"])
    for change, message in (
            ({"feature_cols": ["pixels"]},
             "column 'pixels' is not in the DataFrame \\(it has features, "
             "label, is_val\\)"),
            ({"label_cols": "label"}, "label_cols='label' must be a "
             "non-empty list"),
            ({"store": None}, "store is required"),
            ({"batch_size": 0}, "batch_size=0 is not a positive integer"),
            ({"validation": 1.5}, "validation=1.5 must be a fraction"),
            ({"run_id": "../x"}, "run_id='../x' may hold")):
        with pytest.raises(ValueError, match=message):
            TorchEstimator(**dict(base, **change)).fit(df)


def test_store_create_takes_local_paths_and_names_other_schemes(tmp_path):
    from horovod.spark.common.store import LocalStore, Store

    for path in (str(tmp_path / "a"), "file://" + str(tmp_path / "b")):
        store = Store.create(path)
        assert isinstance(store, LocalStore) and os.path.isdir(
            store.prefix_path)
    store = Store.create(str(tmp_path / "a"))
    target = store.get_checkpoint_path("r1")
    assert target == str(tmp_path / "a" / "runs" / "r1" / "checkpoint")
    store.write(target, b"weights")
    assert store.exists(target) and store.read(target) == b"weights"
    with pytest.raises(ValueError, match="the hdfs:// scheme is not "
                       "supported"):
        Store.create("hdfs://namenode/x")


def test_each_rank_reads_a_disjoint_share_by_row_group(tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from horovod.spark.common.shard import read_shard

    start = 0
    for i, n in enumerate((7, 0, 12, 5)):  # an empty file too
        ids = np.arange(start, start + n)
        table = pa.table({"id": pa.array(ids, pa.int64()),
                          "vec": pa.array([[float(v), -float(v)] for v in ids],
                                          pa.list_(pa.float64()))})
        pq.write_table(table, str(tmp_path / ("part-%d.parquet" % i)),
                       row_group_size=3)
        start += n
    seen = []
    for rank in range(3):
        share = read_shard(str(tmp_path), ["id", "vec"], rank, 3)
        assert share["vec"].shape == (len(share["id"]), 2)
        assert (share["vec"][:, 1] == -share["id"]).all()
        assert len(share["id"]) == 8  # 24 rows, 3 ranks
        seen += share["id"].tolist()
    assert seen == list(range(24))
    pq.write_table(pa.table({"id": [1, 2], "vec": [[1.0], [1.0, 2.0]]}),
                   str(tmp_path / "part-9.parquet"))
    with pytest.raises(ValueError, match="column 'vec' holds arrays of "
                       "different lengths"):
        read_shard(str(tmp_path), ["vec"], 0, 1)


@pytest.mark.timeout(300)
def test_spark_digits_example_fits_and_scores():
    accuracy = example_accuracy(
        "spark_digits.py", "--epochs", "8",
        env={"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    assert accuracy > 0.9, accuracy
