// Hierarchical allreduce for a process set spread over several hosts:
// reduce within each host (shared memory when the host's ranks share it),
// allreduce across hosts between one leader per host (TCP), then broadcast
// within each host from its leader. Across hosts only the leaders send,
// each 2(h-1)/h of the data for h hosts, instead of every rank of a flat
// ring sending 2(n-1)/n over the network.
//
// HostSplit is a pure function of data every rank shares (the members and
// every rank's host key), so all ranks choose the same algorithm without
// talking. HierarchicalGroup is a CollectiveGroup composed of the groups
// for those three steps; thread-safety as CollectiveGroup's.
#ifndef HOROVOD_COLLECTIVES_HIERARCHICAL_GROUP_H_
#define HOROVOD_COLLECTIVES_HIERARCHICAL_GROUP_H_

#include <horovod/types.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/collective_group.h"

namespace horovod {

struct HostSplit {
  std::vector<int> local;    // members on our host, ascending; ours included
  std::vector<int> leaders;  // lowest member of each host, ascending
  bool leader = false;       // we are our host's leader (local[0])
  // Worth it: the members span several hosts and some host has more than
  // one of them (otherwise the split adds steps and saves nothing).
  bool useful = false;
};

// `members`: global ranks, ascending, `me` among them. `hosts[r]` is global
// rank r's host key.
HostSplit SplitByHost(const std::vector<int>& members,
                      const std::vector<std::string>& hosts, int me);

class HierarchicalGroup : public CollectiveGroup {
 public:
  // `local` spans HostSplit::local; `cross` spans HostSplit::leaders and is
  // null on every rank that is not a leader; `flat` spans every member and
  // runs the other collectives. `fusion` (not owned) packs fused tensors.
  HierarchicalGroup(std::unique_ptr<CollectiveGroup> local,
                    std::unique_ptr<CollectiveGroup> cross,
                    std::unique_ptr<CollectiveGroup> flat, Scratch* fusion);

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  int global_rank(int index) const override {
    return flat_->global_rank(index);
  }
  const char* kind() const override { return flat_->kind(); }

  // Phases: "<local kind>HOST_ALLREDUCE", "<cross kind>CROSS_ALLREDUCE"
  // (leaders only), "<local kind>HOST_BROADCAST". The cross-host result may
  // differ in its last bits from the host's own reduction, so every member
  // takes the leader's copy.
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
  std::unique_ptr<CollectiveGroup> local_, cross_, flat_;
  Scratch* fusion_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_HIERARCHICAL_GROUP_H_
