// TcpGroup: a CollectiveGroup whose members exchange data point to point
// through a Transport (TCP between processes, or the loopback transport in
// tests), with the algorithms of collectives.h: recursive doubling or a
// ring for allreduce, rings for reduce-scatter and allgather, a binomial
// tree for broadcast, pairwise exchanges for alltoall. Fused tensors go
// round the ring where they lie (PieceRing); those too small for the ring,
// or prescaled, travel through the fusion buffer. Thread-safety as
// CollectiveGroup's.
#ifndef HOROVOD_COLLECTIVES_TCP_GROUP_H_
#define HOROVOD_COLLECTIVES_TCP_GROUP_H_

#include <vector>

#include "collectives/collective_group.h"
#include "collectives/communicator.h"
#include "collectives/piece_ring.h"

namespace horovod {

class TcpGroup : public CollectiveGroup {
 public:
  // `fusion` (not owned) packs fused tensors; it may be shared with other
  // groups used by the same thread.
  TcpGroup(Communicator comm, Scratch* fusion);

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  int global_rank(int index) const override { return comm_.global_rank(index); }
  const char* kind() const override;
  // The point-to-point view, for algorithms outside this interface (Adasum).
  Communicator& comm() { return comm_; }

  using CollectiveGroup::Allreduce;
  Status Allreduce(const Piece* pieces, size_t n, const ReduceArgs& args,
                   const PhaseFn* on_phase = nullptr) override;
  Status ReduceScatter(void* buf, const std::vector<int64_t>& counts,
                       DataType dtype, ReduceOp op) override;
  Status Allgatherv(const void* send, void* recv,
                    const std::vector<int64_t>& bytes) override;
  Status Broadcast(void* buf, int64_t bytes, int root) override;
  Status Alltoallv(const void* send, const std::vector<int64_t>& send_bytes,
                   void* recv, const std::vector<int64_t>& recv_bytes,
                   int64_t max_pair_bytes) override;

 private:
  Communicator comm_;
  Scratch* fusion_;
  PieceRing ring_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_TCP_GROUP_H_
