"""horovod.torch: Horovod's PyTorch API on the native engine."""

from horovod.common.exceptions import (HorovodInternalError,  # noqa: F401
                                       HorovodInvalidArgumentError)
from horovod.common.process_sets import ProcessSet, global_process_set  # noqa: F401
from horovod.torch.compression import Compression  # noqa: F401
from horovod.torch.functions import (allgather_object,  # noqa: F401
                                     broadcast_object,
                                     broadcast_optimizer_state,
                                     broadcast_parameters)
from horovod.torch.mpi_ops import *  # noqa: F401,F403
from horovod.torch.mpi_ops import (Adasum, Average, Max, Min, Product,  # noqa: F401
                                   Sum, add_process_set, allgather,
                                   allgather_async, allreduce, allreduce_,
                                   allreduce_async, allreduce_async_,
                                   alltoall, alltoall_async, barrier,
                                   broadcast, broadcast_, broadcast_async,
                                   broadcast_async_, ccl_built, cross_rank,
                                   cross_size, cuda_built, ddl_built,
                                   gloo_built, gloo_enabled, grouped_allgather,
                                   grouped_allgather_async, grouped_allreduce,
                                   grouped_allreduce_, grouped_allreduce_async,
                                   grouped_allreduce_async_,
                                   grouped_reducescatter,
                                   grouped_reducescatter_async, init,
                                   is_homogeneous, is_initialized, join,
                                   local_rank, local_size, metrics, mpi_built,
                                   mpi_enabled, mpi_threads_supported,
                                   nccl_built, poll, rank, reducescatter,
                                   reducescatter_async, remove_process_set,
                                   rocm_built, shutdown, size,
                                   sparse_allreduce_async, start_timeline,
                                   stop_timeline, synchronize)
from horovod.torch.optimizer import DistributedOptimizer  # noqa: F401
from horovod.torch import elastic  # noqa: F401,E402
from horovod.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
