#include "collectives/hierarchical_allreduce.h"

#include <unordered_set>

#include "collectives/collectives.h"

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

Status HierarchicalAllreduce(Communicator& local, Communicator* cross,
                             void* buf, int64_t count, DataType dtype,
                             ReduceOp op, const PhaseFn* on_phase) {
  if (count == 0) return Status::OK();
  auto phase = [&](const char* name, const Communicator& comm) {
    if (on_phase != nullptr) (*on_phase)(name, comm);
  };
  // Within the host every member computes the host's reduction, so the
  // leader holds it without a separate gather step; on shared memory this
  // costs about what a reduce to the leader would.
  phase("HOST_ALLREDUCE", local);
  HVD_RETURN_IF_ERROR(Allreduce(local, buf, count, dtype, op));
  if (cross != nullptr) {
    phase("CROSS_ALLREDUCE", *cross);
    HVD_RETURN_IF_ERROR(Allreduce(*cross, buf, count, dtype, op));
  }
  // The cross-host result may differ in its last bits from the host's own
  // reduction, so every member takes the leader's copy.
  phase("HOST_BROADCAST", local);
  return Broadcast(local, buf,
                   count * static_cast<int64_t>(DataTypeSize(dtype)), 0);
}

}  // namespace horovod
