// The point-to-point collective algorithms, as free functions over a
// Communicator: what TcpGroup runs. Every member calls the same function
// with matching sizes (the coordinator has already checked them). Results
// are bit-identical on every member: each element is reduced in the same
// order everywhere.
#ifndef HOROVOD_COLLECTIVES_COLLECTIVES_H_
#define HOROVOD_COLLECTIVES_COLLECTIVES_H_

#include <horovod/types.h>

#include <vector>

#include "collectives/communicator.h"

namespace horovod {

// Exclusive prefix sums: element i is where block i starts; the last element
// is the total.
std::vector<int64_t> Offsets(const std::vector<int64_t>& sizes);

// In place over `count` elements. op: Sum, Min, Max or Product; the result
// is multiplied by `postscale` (Average's 1/size). Picks recursive
// doubling below config().small_allreduce_bytes, else the ring, which
// scales each block in its last reduction instead of in a pass of its own.
Status Allreduce(Communicator& comm, void* buf, int64_t count, DataType dtype,
                 ReduceOp op, double postscale = 1.0);
// Whether Allreduce takes the ring for `count` elements (the same answer
// on every member).
bool TakesRing(const Communicator& comm, int64_t count, DataType dtype);
// `a` modulo `n` in [0, n), for ring neighbours and blocks counted back
// from a member (a may be negative).
inline int Mod(int a, int n) { return ((a % n) + n) % n; }
// The ring's blocks of `count` elements: member i's is count / n elements,
// one more for the first count % n; written to (*counts)[0, n).
void RingBlocks(int64_t count, int n, std::vector<int64_t>* counts);
Status RingAllreduce(Communicator& comm, void* buf, int64_t count,
                     DataType dtype, ReduceOp op, double postscale = 1.0);
Status RecursiveDoublingAllreduce(Communicator& comm, void* buf, int64_t count,
                                  DataType dtype, ReduceOp op);

// Reduce-scatter in place: afterwards member i holds the full reduction of
// block i (elements [offsets[i], offsets[i] + counts[i])) within `buf`,
// multiplied by `postscale`.
Status RingReduceScatter(Communicator& comm, void* buf,
                         const std::vector<int64_t>& counts, DataType dtype,
                         ReduceOp op, double postscale = 1.0);

// Member i contributes bytes[i] bytes; `recv` receives all contributions
// concatenated in member order. Our contribution is read from `send` (which
// may already sit at its place inside `recv`).
Status RingAllgatherv(Communicator& comm, const void* send, void* recv,
                      const std::vector<int64_t>& bytes);

// Binomial tree from `root`, a member index.
Status BinomialBroadcast(Communicator& comm, void* buf, int64_t bytes,
                         int root);

// send_bytes[i] go to member i, recv_bytes[i] come from member i; both
// buffers are packed in member order. Step k exchanges with the members k
// ahead and k behind.
Status PairwiseAlltoallv(Communicator& comm, const void* send,
                         const std::vector<int64_t>& send_bytes, void* recv,
                         const std::vector<int64_t>& recv_bytes);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_COLLECTIVES_H_
