// ShmCollectiveGroup: a CollectiveGroup whose members share a host and
// exchange data through a ShmGroup's mapped regions (shm_collectives.h).
// Fused tensors are reduced where they lie, without a fusion buffer, unless
// their memory overlaps. Thread-safety as CollectiveGroup's.
#ifndef HOROVOD_COLLECTIVES_SHM_COLLECTIVE_GROUP_H_
#define HOROVOD_COLLECTIVES_SHM_COLLECTIVE_GROUP_H_

#include <utility>
#include <vector>

#include "collectives/collective_group.h"
#include "collectives/communicator.h"
#include "transport/shm_group.h"

namespace horovod {

class ShmCollectiveGroup : public CollectiveGroup {
 public:
  // `shm` (not owned) spans the members; `fusion` (not owned) serves runs
  // whose pieces overlap.
  ShmCollectiveGroup(ShmGroup* shm, AlgorithmConfig config, Scratch* fusion);

  int rank() const override { return shm_->index(); }
  int size() const override { return shm_->size(); }
  int global_rank(int index) const override { return shm_->members()[index]; }
  const char* kind() const override { return "SHM_"; }

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
  // Whether any two pieces share memory (operands or results). Reduced
  // where they lie, a later piece would read an earlier one's result as its
  // operand (in a later round).
  bool AnyOverlap(const Piece* pieces, size_t n, size_t esize);

  ShmGroup* shm_;
  AlgorithmConfig config_;
  Scratch* fusion_;
  std::vector<Piece> scaled_;  // reused: pieces after prescaling
  std::vector<std::pair<const char*, const char*>> ranges_;  // AnyOverlap
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_SHM_COLLECTIVE_GROUP_H_
