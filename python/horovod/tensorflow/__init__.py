"""horovod.tensorflow: Horovod's TensorFlow 2 API on the native engine.

Collectives work eagerly, inside tf.function and in tf.compat.v1 graphs;
DistributedGradientTape reduces a step's gradients as one unit. Keras
optimizers and callbacks live in horovod.tensorflow.keras."""

try:
    import tensorflow as _tf  # noqa: F401
except ImportError as e:
    raise ImportError(
        "horovod.tensorflow needs TensorFlow, which is not installed: "
        "pip install tensorflow-cpu==2.21.0") from e

from horovod.common.exceptions import (HorovodInternalError,  # noqa: F401
                                       HorovodInvalidArgumentError)
from horovod.common.process_sets import ProcessSet, global_process_set  # noqa: F401
from horovod.tensorflow.compression import Compression  # noqa: F401
from horovod.tensorflow.functions import (allgather_object,  # noqa: F401
                                          broadcast_global_variables,
                                          broadcast_object,
                                          broadcast_object_fn,
                                          broadcast_variables)
from horovod.tensorflow.gradient_tape import (  # noqa: F401
    DistributedGradientTape, PartialDistributedGradientTape)
from horovod.tensorflow.control_ops import (barrier, join,  # noqa: F401
                                            local_rank_op, local_size_op,
                                            process_set_included_op, rank_op,
                                            size_op)
from horovod.tensorflow.mpi_ops import (Adasum, Average, Max, Min,  # noqa: F401
                                        Product, Sum, add_process_set,
                                        allgather, allreduce, alltoall,
                                        broadcast, broadcast_,
                                        ccl_built, cross_rank, cross_size,
                                        cuda_built, ddl_built, gloo_built,
                                        gloo_enabled, grouped_allgather,
                                        grouped_allreduce,
                                        grouped_reducescatter, init,
                                        is_homogeneous, is_initialized,
                                        local_rank, local_size, metrics,
                                        mpi_built,
                                        mpi_enabled, mpi_threads_supported,
                                        nccl_built, rank, reducescatter,
                                        remove_process_set, rocm_built,
                                        shutdown, size,
                                        start_timeline, stop_timeline)
from horovod.tensorflow.optimizer import (  # noqa: F401
    BroadcastGlobalVariablesHook, DistributedOptimizer)
from horovod.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: F401
from horovod.tensorflow import elastic  # noqa: F401,E402
