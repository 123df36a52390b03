"""horovod.jax: Horovod's collectives for JAX arrays and pytrees, eagerly
and under jax.jit and jax.grad, and a DistributedOptimizer for optax."""

try:
    import jax as _jax  # noqa: F401
except ImportError as e:
    raise ImportError(
        "horovod.jax needs JAX, which is not installed: "
        "pip install jax==0.10.2 jaxlib==0.10.2") from e

from horovod.common.process_sets import ProcessSet, global_process_set  # noqa: F401
from horovod.jax.mpi_ops import (Adasum, Average, HorovodInternalError,  # noqa: F401
                                 HorovodInvalidArgumentError, Max, Min,
                                 Product, Sum, add_process_set, allgather,
                                 allgather_object, allreduce, alltoall,
                                 barrier, broadcast, broadcast_object,
                                 broadcast_parameters, broadcast_variables,
                                 cross_rank, cross_size, grouped_allreduce,
                                 init, is_homogeneous, is_initialized, join,
                                 local_rank, local_size, metrics, rank,
                                 reducescatter,
                                 remove_process_set, shutdown, size,
                                 start_timeline, stop_timeline)
from horovod.jax.optimizer import DistributedOptimizer, allreduce_gradients  # noqa: F401
