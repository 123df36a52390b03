#include "collectives/hierarchical_group.h"

#include <unordered_set>
#include <utility>

namespace horovod {

HostSplit SplitByHost(const std::vector<int>& members,
                      const std::vector<std::string>& hosts, int me) {
  HostSplit s;
  std::unordered_set<std::string> seen;
  for (int m : members) {
    if (hosts[m] == hosts[me]) s.local.push_back(m);
    if (seen.insert(hosts[m]).second) s.leaders.push_back(m);
  }
  s.leader = !s.local.empty() && s.local[0] == me;
  s.useful = s.leaders.size() > 1 && s.leaders.size() < members.size();
  return s;
}

HierarchicalGroup::HierarchicalGroup(std::unique_ptr<CollectiveGroup> local,
                                     std::unique_ptr<CollectiveGroup> cross,
                                     std::unique_ptr<CollectiveGroup> flat,
                                     Scratch* fusion)
    : local_(std::move(local)),
      cross_(std::move(cross)),
      flat_(std::move(flat)),
      fusion_(fusion) {}

Status HierarchicalGroup::Allreduce(const Piece* pieces, size_t n,
                                    const ReduceArgs& args,
                                    const PhaseFn* on_phase) {
  auto phase = [&](const CollectiveGroup& g, const char* name) {
    if (on_phase != nullptr) (*on_phase)(g.kind(), name);
  };
  return AllreducePacked(
      pieces, n, args, fusion_, on_phase, [&](char* buf, int64_t count) {
        // Within the host every member computes the host's reduction, so
        // the leader holds it without a separate gather step; on shared
        // memory this costs about what a reduce to the leader would.
        phase(*local_, "HOST_ALLREDUCE");
        HVD_RETURN_IF_ERROR(local_->Allreduce(buf, count, args.dtype, args.op));
        if (cross_ != nullptr) {
          phase(*cross_, "CROSS_ALLREDUCE");
          HVD_RETURN_IF_ERROR(
              cross_->Allreduce(buf, count, args.dtype, args.op));
        }
        phase(*local_, "HOST_BROADCAST");
        return local_->Broadcast(
            buf, count * static_cast<int64_t>(DataTypeSize(args.dtype)), 0);
      });
}

Status HierarchicalGroup::ReduceScatter(void* buf,
                                        const std::vector<int64_t>& counts,
                                        DataType dtype, ReduceOp op) {
  return flat_->ReduceScatter(buf, counts, dtype, op);
}

Status HierarchicalGroup::Allgatherv(const void* send, void* recv,
                                     const std::vector<int64_t>& bytes) {
  return flat_->Allgatherv(send, recv, bytes);
}

Status HierarchicalGroup::Broadcast(void* buf, int64_t bytes, int root) {
  return flat_->Broadcast(buf, bytes, root);
}

Status HierarchicalGroup::Alltoallv(const void* send,
                                    const std::vector<int64_t>& send_bytes,
                                    void* recv,
                                    const std::vector<int64_t>& recv_bytes,
                                    int64_t max_pair_bytes) {
  return flat_->Alltoallv(send, send_bytes, recv, recv_bytes, max_pair_bytes);
}

}  // namespace horovod
