"""horovod.ray: Horovod jobs on a Ray cluster, each rank a Ray actor
(`RayExecutor`; `ElasticRayExecutor` for hvd.elastic jobs); see
docs/ray.md."""

try:
    import ray  # noqa: F401
except ImportError as e:
    raise ImportError("horovod.ray needs Ray: pip install ray") from e

from horovod.ray.elastic import ElasticRayExecutor
from horovod.ray.runner import RayExecutor
from horovod.ray.worker import BaseHorovodWorker

__all__ = ["RayExecutor", "ElasticRayExecutor", "BaseHorovodWorker"]
