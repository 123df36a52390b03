"""horovod.spark on a Spark standalone cluster across hosts: a master on
test host hvd-h1, a one-core worker on hvd-h2 and another on hvd-h3
(tests/multihost/testhosts.py: network namespaces, each with its own
address, hostname and /dev/shm), and a driver on hvd-h1 as a user of that
cluster runs a job, an elastic job and an Estimator. The hosts share this machine's files, so a LocalStore
under /tmp is a shared store."""

import json
import os

import pytest

from test_multihost import PY, ROOT, hosts, on_host  # noqa: F401 - fixture

import testhosts

pytest.importorskip("pyspark")

MASTER = "spark://%s:7077" % testhosts.host_addr(1)

DRIVER = r'''
import json, sys
from pyspark.sql import SparkSession
import horovod.spark

spark = (SparkSession.builder.master("%(master)s")
         .config("spark.driver.host", "%(driver)s")
         .config("spark.executor.cores", "1")
         .config("spark.executor.memory", "512m")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")

def collectives():
    import socket, torch
    import horovod.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
    return {"rank": hvd.rank(), "host": socket.gethostname(),
            "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
            "cross_size": hvd.cross_size(), "sum": total.item()}

print("RESULTS " + json.dumps(horovod.spark.run(collectives, num_proc=2,
                                                start_timeout=120)),
      flush=True)

def elastic_steps():
    import socket, torch
    import horovod.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(step=0, total=0.0)

    @hvd.elastic.run
    def train(state):
        while state.step < 20:
            state.total += hvd.allreduce(torch.tensor([float(state.step)]),
                                         op=hvd.Sum).item()
            state.step += 1
            state.commit()
        return {"rank": hvd.rank(), "host": socket.gethostname(),
                "cross_size": hvd.cross_size(), "total": state.total}

    return train(state)

print("ELASTIC " + json.dumps(horovod.spark.run_elastic(
    elastic_steps, num_proc=2, start_timeout=120, verbose=0)), flush=True)

import torch
from sklearn.datasets import load_digits
from horovod.spark.common.store import LocalStore
from horovod.spark.torch import TorchEstimator

d = load_digits()
df = spark.createDataFrame([((d.data[i] / 16.0).tolist(), int(d.target[i]))
                            for i in range(len(d.target))],
                           ["features", "label"])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 10))
fitted = TorchEstimator(
    num_proc=2, model=model,
    optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
    loss=torch.nn.functional.cross_entropy, store=LocalStore(sys.argv[1]),
    feature_cols=["features"], label_cols=["label"], batch_size=32,
    epochs=8, verbose=0).fit(df)
out = fitted.transform(df).toPandas()
import numpy as np
accuracy = (np.stack(out["label__output"].to_numpy()).argmax(1)
            == out["label"].to_numpy()).mean()
print("FITTED " + json.dumps({"loss": fitted.getHistory()["loss"],
                              "accuracy": accuracy}), flush=True)
spark.stop()
'''


def _spark_class():
    import pyspark
    return os.path.join(os.path.dirname(pyspark.__file__), "bin",
                        "spark-class")


@pytest.fixture(scope="module")
def cluster(hosts, tmp_path_factory):  # noqa: F811 - the imported fixture
    import subprocess

    work = tmp_path_factory.mktemp("spark-hosts")
    logs = []

    def start(i, argv):
        env = ["env", "SPARK_LOCAL_IP=" + testhosts.host_addr(i),
               "PYSPARK_PYTHON=" + PY, "SPARK_WORKER_DIR=%s/h%d" % (work, i)]
        log = open(work / ("h%d.log" % i), "w")
        logs.append(log)
        subprocess.Popen(testhosts.exec_argv(i, env + [_spark_class()] + argv,
                                             ROOT),
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)

    try:
        start(1, ["org.apache.spark.deploy.master.Master", "--host",
                  testhosts.host_addr(1), "--port", "7077", "--webui-port",
                  "18080"])
        for i in (2, 3):
            start(i, ["org.apache.spark.deploy.worker.Worker", "--host",
                      testhosts.host_addr(i), "--cores", "1", "--memory",
                      "1g", "--webui-port", "18081", MASTER])
        yield work
    finally:
        testhosts.kill_matching((1, 2, 3), "org.apache.spark")
        for log in logs:
            log.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ranks_on_executors_of_two_hosts_train_and_score(cluster):
    script = cluster / "driver.py"
    script.write_text(DRIVER % {"master": MASTER,
                                "driver": testhosts.host_addr(1)})
    out = on_host(1, ["env", "SPARK_LOCAL_IP=" + testhosts.host_addr(1),
                      "PYSPARK_PYTHON=" + PY, PY, str(script),
                      str(cluster / "store")], timeout=280)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = {l.split(" ", 1)[0]: json.loads(l.split(" ", 1)[1])
             for l in out.stdout.splitlines()
             if l.split(" ", 1)[0] in ("RESULTS", "ELASTIC", "FITTED")}
    results = lines["RESULTS"]
    assert [r["rank"] for r in results] == [0, 1]
    assert sorted(r["host"] for r in results) == ["hvd-h2", "hvd-h3"]
    for r in results:
        assert r["local_size"] == 1 and r["cross_size"] == 2
        assert r["cross_rank"] == r["rank"] and r["sum"] == 3.0
    # An elastic job whose slot agents run on the two workers' executors.
    elastic = lines["ELASTIC"]
    assert [r["rank"] for r in elastic] == [0, 1]
    assert sorted(r["host"] for r in elastic) == ["hvd-h2", "hvd-h3"]
    for r in elastic:
        assert r["cross_size"] == 2 and r["total"] == 2 * sum(range(20))
    fitted = lines["FITTED"]
    assert fitted["loss"][-1] < fitted["loss"][0] / 3, fitted
    assert fitted["accuracy"] > 0.9, fitted
