// Collectives over a ShmGroup (all members on one host): what
// ShmCollectiveGroup runs. Same contracts as CollectiveGroup's, with member
// indices of the group.
// Data larger than a region goes in rounds; every member computes the same
// number of rounds from arguments they all share.
#ifndef HOROVOD_COLLECTIVES_SHM_COLLECTIVES_H_
#define HOROVOD_COLLECTIVES_SHM_COLLECTIVES_H_

#include <horovod/types.h>

#include <vector>

#include "collectives/collective_group.h"
#include "transport/shm_group.h"

namespace horovod {

// In place over a run of `n` pieces, each read and written where it lies:
// fused tensors need no fusion buffer (and no copies into and out of one).
// Below `small_bytes` every member reduces the whole vector from every
// region (one barrier: latency-optimal); otherwise member i reduces block i
// straight from the peers' regions and the others copy it (each byte
// crosses once: bandwidth-optimal). The result is multiplied by
// `postscale` (Average's 1/size), by each block's owner while the block is
// still in cache.
Status ShmAllreduce(ShmGroup& g, const Piece* pieces, size_t n, DataType dtype,
                    ReduceOp op, int64_t small_bytes, double postscale = 1.0);

// In place: afterwards member i holds the reduction of its block
// (elements [offsets[i], offsets[i] + counts[i]) of `buf`).
Status ShmReduceScatter(ShmGroup& g, void* buf,
                        const std::vector<int64_t>& counts, DataType dtype,
                        ReduceOp op);

Status ShmAllgatherv(ShmGroup& g, const void* send, void* recv,
                     const std::vector<int64_t>& bytes);

Status ShmBroadcast(ShmGroup& g, void* buf, int64_t bytes, int root);

// `max_pair_bytes`: the largest number of bytes any member sends any other
// (the same on every member).
Status ShmAlltoallv(ShmGroup& g, const void* send,
                    const std::vector<int64_t>& send_bytes, void* recv,
                    const std::vector<int64_t>& recv_bytes,
                    int64_t max_pair_bytes);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_SHM_COLLECTIVES_H_
