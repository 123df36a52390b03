"""Job start-up overhead on Spark and Ray: from the call that starts a
Horovod job to the end of its first collective (hvd.init() and a 4-byte
allreduce on every rank), and to the call's return. horovod.run on this
host is measured in the same run for comparison.

    python benchmarks/cluster_startup.py --trials 5 [--sections run,spark,ray]

Prints one line per configuration:
STARTUP,<label>,<np>,<median first collective s>,<min>,<max>,<median return s>,<trials>
Spark is a local-cluster (a standalone master and NP one-core workers,
each its own executor JVM), started once and warmed by one job first;
Ray a local instance with NP CPUs. For Ray `start+run` counts actor
creation (start()) too; `run` reuses started actors.
"""

import argparse
import os
import statistics
import sys
import time


def first_collective():
    """Runs on every rank: the wall-clock time its first collective ended."""
    import torch

    import horovod.torch as hvd

    hvd.init()
    hvd.allreduce(torch.ones(1), name="startup")
    return time.time()


def report(label, np, firsts, returns):
    print("STARTUP,%s,%d,%.3f,%.3f,%.3f,%.3f,%d" % (
        label, np, statistics.median(firsts), min(firsts), max(firsts),
        statistics.median(returns), len(firsts)), flush=True)


def measure(label, np, trials, call):
    firsts, returns = [], []
    for _ in range(trials):
        t0 = time.time()
        ends = call()
        returns.append(time.time() - t0)
        firsts.append(max(ends) - t0)
    report(label, np, firsts, returns)


def run_section(np, trials):
    import horovod
    measure("horovod.run", np, trials,
            lambda: horovod.run(first_collective, np=np))


def spark_section(np, trials):
    from pyspark.sql import SparkSession

    import horovod.spark

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local-cluster[%d,1,1024]" % np)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        horovod.spark.run(first_collective, num_proc=np)  # warm the JVMs
        measure("horovod.spark.run", np, trials,
                lambda: horovod.spark.run(first_collective, num_proc=np))
        measure("horovod.spark.run_elastic", np, trials,
                lambda: horovod.spark.run_elastic(first_collective,
                                                  num_proc=np, verbose=0))
    finally:
        spark.stop()


def ray_section(np, trials):
    import ray

    from horovod.ray import RayExecutor

    ray.init(num_cpus=np, include_dashboard=False, log_to_driver=False)
    try:
        def cold():
            ex = RayExecutor(RayExecutor.create_settings(), num_workers=np)
            try:
                ex.start()
                return ex.run(first_collective)
            finally:
                ex.shutdown()

        cold()  # warm Ray's worker pool and imports
        measure("RayExecutor.start+run", np, trials, cold)
        ex = RayExecutor(RayExecutor.create_settings(), num_workers=np)
        ex.start()
        ex.run(first_collective)
        try:
            measure("RayExecutor.run", np, trials,
                    lambda: ex.run(first_collective))
        finally:
            ex.shutdown()
    finally:
        ray.shutdown()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--sections", default="run,spark,ray")
    args = p.parse_args()
    sections = {"run": run_section, "spark": spark_section,
                "ray": ray_section}
    for name in args.sections.split(","):
        sections[name](args.np, args.trials)


if __name__ == "__main__":
    main()
