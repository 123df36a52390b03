"""The process's job functions under upstream's names (init, shutdown,
topology, build facts, process sets, timeline), bound to the one engine
every adapter shares; each adapter re-exports them with
`from horovod.common.topology import *`."""

from horovod.common.ops import process_collectives

_basics = process_collectives().basics

init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
size = _basics.size
rank = _basics.rank
local_size = _basics.local_size
local_rank = _basics.local_rank
cross_size = _basics.cross_size
cross_rank = _basics.cross_rank
is_homogeneous = _basics.is_homogeneous
mpi_threads_supported = _basics.mpi_threads_supported
mpi_enabled = _basics.mpi_enabled
mpi_built = _basics.mpi_built
gloo_enabled = _basics.gloo_enabled
gloo_built = _basics.gloo_built
nccl_built = _basics.nccl_built
ddl_built = _basics.ddl_built
ccl_built = _basics.ccl_built
cuda_built = _basics.cuda_built
rocm_built = _basics.rocm_built
add_process_set = _basics.add_process_set
remove_process_set = _basics.remove_process_set
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline
metrics = _basics.metrics

__all__ = ["init", "shutdown", "is_initialized", "size", "rank",
           "local_size", "local_rank", "cross_size", "cross_rank",
           "is_homogeneous", "mpi_threads_supported", "mpi_enabled",
           "mpi_built", "gloo_enabled", "gloo_built", "nccl_built",
           "ddl_built", "ccl_built", "cuda_built", "rocm_built",
           "add_process_set", "remove_process_set", "start_timeline",
           "stop_timeline", "metrics"]
