// The collective algorithms, as free functions over a Communicator. Every
// member calls the same function with matching sizes (the coordinator has
// already checked them). Results are bit-identical on every member: each
// element is reduced in the same order everywhere.
#ifndef HOROVOD_COLLECTIVES_COLLECTIVES_H_
#define HOROVOD_COLLECTIVES_COLLECTIVES_H_

#include <horovod/types.h>

#include <vector>

#include "collectives/communicator.h"

namespace horovod {

// Exclusive prefix sums: element i is where block i starts; the last element
// is the total.
std::vector<int64_t> Offsets(const std::vector<int64_t>& sizes);

// The entry points pick the algorithm: shared memory when the communicator
// has a ShmGroup, else the TCP algorithms below them.

// In place over `count` elements. op: Sum, Min, Max or Product. Picks
// recursive doubling below config().small_allreduce_bytes, else the ring.
Status Allreduce(Communicator& comm, void* buf, int64_t count, DataType dtype,
                 ReduceOp op);
Status RingAllreduce(Communicator& comm, void* buf, int64_t count,
                     DataType dtype, ReduceOp op);
Status RecursiveDoublingAllreduce(Communicator& comm, void* buf, int64_t count,
                                  DataType dtype, ReduceOp op);

// Reduce-scatter in place: afterwards member i holds the full reduction of
// block i (elements [offsets[i], offsets[i] + counts[i])) within `buf`.
Status ReduceScatter(Communicator& comm, void* buf,
                     const std::vector<int64_t>& counts, DataType dtype,
                     ReduceOp op);
Status RingReduceScatter(Communicator& comm, void* buf,
                         const std::vector<int64_t>& counts, DataType dtype,
                         ReduceOp op);

// Member i contributes bytes[i] bytes; `recv` receives all contributions
// concatenated in member order. Our contribution is read from `send` (which
// may already sit at its place inside `recv`).
Status Allgatherv(Communicator& comm, const void* send, void* recv,
                  const std::vector<int64_t>& bytes);
Status RingAllgatherv(Communicator& comm, const void* send, void* recv,
                      const std::vector<int64_t>& bytes);

// `root` is a member index.
Status Broadcast(Communicator& comm, void* buf, int64_t bytes, int root);

// send_bytes[i] go to member i, recv_bytes[i] come from member i; both
// buffers are packed in member order. `max_pair_bytes` is the most any
// member sends any other (the same value on every member).
Status Alltoallv(Communicator& comm, const void* send,
                 const std::vector<int64_t>& send_bytes, void* recv,
                 const std::vector<int64_t>& recv_bytes,
                 int64_t max_pair_bytes);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_COLLECTIVES_H_
