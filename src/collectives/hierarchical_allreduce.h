// Hierarchical allreduce for a process set spread over several hosts:
// reduce within each host (shared memory when the host's ranks form a
// ShmGroup), allreduce across hosts between one leader per host (TCP), then
// broadcast within each host from its leader. Across hosts only the leaders
// send, each 2(h-1)/h of the data for h hosts, instead of every rank of a
// flat ring sending 2(n-1)/n over the network.
//
// HostSplit is a pure function of data every rank shares (the members and
// every rank's host key), so all ranks choose the same algorithm without
// talking. Free functions; no state; thread-compatible.
#ifndef HOROVOD_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
#define HOROVOD_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_

#include <horovod/types.h>

#include <functional>
#include <string>
#include <vector>

#include "collectives/communicator.h"

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

// Called as each phase starts, with its name and the communicator it runs
// on: "HOST_ALLREDUCE", "CROSS_ALLREDUCE" (leaders only), "HOST_BROADCAST".
using PhaseFn = std::function<void(const char* phase, const Communicator&)>;

// In place over `count` elements; every member ends with bit-identical
// results. `local` spans HostSplit::local; `cross` spans HostSplit::leaders
// and is null on every rank that is not a leader.
Status HierarchicalAllreduce(Communicator& local, Communicator* cross,
                             void* buf, int64_t count, DataType dtype,
                             ReduceOp op, const PhaseFn* on_phase = nullptr);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
