// Hierarchical collectives for a process set spread over several hosts:
// each works within every host (shared memory when the host's ranks share
// it), between one leader per host (TCP), and within every host again, so
// that only the leaders send across hosts. Allreduce: reduce within the
// host, allreduce between leaders (which also applies the postscale),
// broadcast within the host (each leader sends 2(h-1)/h of the data for h
// hosts, instead of every rank of a flat ring sending 2(n-1)/n over the
// network). Broadcast: within the root's
// host, between leaders, within every other host. Allgather: within each
// host, between leaders (whole hosts' blocks), then the whole result
// within each host. Reducescatter: reduce within the host, reducescatter
// of hosts' blocks between leaders, each host's block within its host.
// Alltoall: each host's ranks' blocks meet at its leader, leaders exchange
// what crosses between each pair of hosts, and each leader hands its
// host's ranks their share. Moving data (broadcast, allgather, alltoall)
// gives results identical to the flat algorithms; reductions are
// identical on every rank, and to the flat ones wherever the order of
// combining does not matter (integers, min, max; floating-point sums may
// differ in their last bits, as between any two allreduce algorithms).
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
#include "collectives/cross_pipeline.h"

namespace horovod {

struct HostSplit {
  std::vector<int> local;    // members on our host, ascending; ours included
  std::vector<int> leaders;  // lowest member of each host, ascending
  bool leader = false;       // we are our host's leader (local[0])
  // Worth it: the members span several hosts and some host has more than
  // one of them (otherwise the split adds steps and saves nothing).
  bool useful = false;
  // By member index (position in `members`): the index of its host (its
  // leader's position in `leaders`) and its position among its host's
  // members. By host index: its members' indices, ascending.
  std::vector<int> host_of;
  std::vector<int> index_in_host;
  std::vector<std::vector<int>> host_members;
  int my_host = 0;
  // Every host's members are consecutive member indices, hosts in order:
  // then a host's blocks of an allgather or reducescatter are one run.
  bool contiguous = false;
  // Useful, and every host holds as many members: then the members with
  // our position in their host, one per host (global ranks, ascending),
  // can carry one stripe of an allreduce across hosts.
  bool even = false;
  std::vector<int> stripe;
};

// Which collectives go hierarchically (the others run flat).
struct Hierarchy {
  bool reductions = true;  // allreduce, reducescatter
  bool movement = true;    // allgather, broadcast, alltoall
  // A leader may run the cross-host phase on a thread of its own, beside
  // the host's phases: they do not use the transport (shared memory).
  bool overlap = false;
  // On even hosts, every member carries a stripe of an allreduce across
  // hosts (striped leaders) instead of one leader carrying all of it.
  bool striped = true;
};

// `members`: global ranks, ascending, `me` among them. `hosts[r]` is global
// rank r's host key.
HostSplit SplitByHost(const std::vector<int>& members,
                      const std::vector<std::string>& hosts, int me);

class HierarchicalGroup : public CollectiveGroup {
 public:
  // Allreduces of this many bytes or more go in segments, kSegments of
  // them at most kMaxSegmentBytes each (more segments for larger runs).
  static constexpr int64_t kSegmentedFrom = 4 << 20;
  static constexpr int64_t kSegments = 8;
  static constexpr int64_t kMaxSegmentBytes = 16 << 20;

  // `local` spans HostSplit::local; `cross` spans HostSplit::leaders and is
  // null on every rank that is not a leader; `stripe` spans
  // HostSplit::stripe where allreduce goes striped (else null); `flat`
  // spans every member and runs what `hierarchy` leaves flat. `fusion`
  // (not owned) packs fused tensors.
  HierarchicalGroup(const HostSplit& split, Hierarchy hierarchy,
                    std::unique_ptr<CollectiveGroup> local,
                    std::unique_ptr<CollectiveGroup> cross,
                    std::unique_ptr<CollectiveGroup> stripe,
                    std::unique_ptr<CollectiveGroup> flat, Scratch* fusion);

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  int global_rank(int index) const override {
    return flat_->global_rank(index);
  }
  const char* kind() const override { return flat_->kind(); }

  // One leader per host: phases "<local kind>HOST_ALLREDUCE", "<cross
  // kind>CROSS_ALLREDUCE" (leaders only), "<local kind>HOST_BROADCAST"; the
  // cross-host result may differ in its last bits from the host's own
  // reduction, so every member takes the leader's copy. Striped (a stripe
  // group given): "HOST_REDUCESCATTER" (member i holds stripe i of the
  // host's reduction), "CROSS_ALLREDUCE" (every member, its stripe with the
  // same stripe of every other host), "HOST_ALLGATHER"; each link then
  // carries 1/L of the data for L members per host, from L ranks at once.
  // From kSegmentedFrom bytes the run goes in segments, pipelined: the
  // host takes segment s + 1 in while the cross-host step runs on segment s
  // (on its own thread with Hierarchy::overlap) and gives segment s out
  // while it runs on s + 1, so a slow link is busy nearly all the time. The
  // segments are a function of the size alone, the same on every rank. The
  // other collectives report no phases.
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
  // Bytes of each host's members in host order, into hosts_ (by host)
  // and local_bytes_ (our host's members); returns the total.
  int64_t SumByHost(const std::vector<int64_t>& bytes);
  Status HostsAllreduce(char* buf, int64_t count, const ReduceArgs& args,
                        const PhaseFn* on_phase);
  // Splits `count` elements into one stripe per member of the host, into
  // stripe_counts_, stripe_bytes_ and stripe_at_ (where ours starts).
  void Stripes(int64_t count, size_t esize);
  Status HostMajorAlltoall(const void* send,
                           const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes);

  HostSplit split_;
  Hierarchy hierarchy_;
  std::unique_ptr<CollectiveGroup> local_, cross_, stripe_, flat_;
  Scratch* fusion_;
  // Runs the cross-host steps of allreduce: on leaders, or every member
  // when striped.
  std::unique_ptr<CrossPipeline> pipeline_;
  std::vector<int64_t> stripe_counts_, stripe_bytes_;
  int64_t stripe_at_ = 0;
  // Reused across calls: sizes, offsets and a host-major staging area.
  std::vector<int64_t> hosts_, local_bytes_, offsets_, matrix_, sizes_,
      cross_send_, cross_recv_, cursor_;
  Scratch staging_, gathered_, received_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_HIERARCHICAL_GROUP_H_
