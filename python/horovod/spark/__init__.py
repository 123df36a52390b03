"""horovod.spark: Horovod jobs on a Spark cluster's executors
(`run(fn, ...)`, and elastic ones with `run_elastic(fn, ...)`); see
docs/spark.md."""

try:
    import pyspark  # noqa: F401
except ImportError as e:
    raise ImportError("horovod.spark needs PySpark: pip install pyspark") \
        from e

from horovod.spark.elastic import run_elastic
from horovod.spark.runner import run

__all__ = ["run", "run_elastic"]
