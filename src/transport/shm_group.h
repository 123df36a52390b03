// ShmGroup: the ranks of one host, each with a shared-memory segment that
// every other member maps, plus a barrier over them. The shared-memory
// collectives (collectives/shm_collectives.h) are written against it: a rank
// writes into its own region, everyone passes a barrier, and then each rank
// reads the others' regions directly, so data crosses between processes with
// one copy and reductions read straight from the peers' memory.
//
// Regions come in two halves used alternately (NextStep), which is what
// makes one barrier per step enough: a rank rewrites a half only after every
// member has passed a later barrier, i.e. has finished reading it.
//
// Waiting spins for a short while (cheap when every rank has a core, and
// only while recent waits were that short: AdaptiveSpin), then sleeps on a
// futex in the peer's segment (so oversubscribed ranks give the
// core to the one doing the work). Every wait has the operation deadline and
// notices a dead peer: the peer's TCP link is polled for hang-up while
// sleeping, since the kernel closes it the moment the process dies.
//
// Thread-safety: used by one thread at a time (whichever drives the engine's
// loop), except Abort, which any thread may call.
#ifndef HOROVOD_TRANSPORT_SHM_GROUP_H_
#define HOROVOD_TRANSPORT_SHM_GROUP_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/doorbell.h"
#include "transport/shm_segment.h"
#include "transport/transport.h"

namespace horovod {

struct ShmConfig {
  size_t region_bytes = 4u << 20;  // per half
  size_t board_bytes = 0;          // a user's area per member (see board())
  // Large allreduce rounds moving at least this many bytes seal their half
  // (Seal); 0: never.
  size_t seal_bytes = 1u << 20;
  // Allreduces of at least this many bytes write their out-of-place results
  // around the cache (StreamCopy): a framework allocates that buffer for
  // each call, so it is cold, and a store to a line not in cache reads the
  // line from memory first. Below it the result may still be in cache when
  // the framework reads it. 0: never.
  size_t stream_bytes = 32u << 20;
  double timeout_s = 300;  // longest wait for a silent peer
  double spin_us = 50;     // most busy-waiting before sleeping
};

class ShmGroup {
 public:
  // Collective over `transport` among `members` (global ranks, ascending,
  // ours included, at least two): creates our segment, swaps names with the
  // others over the transport, attaches theirs, and unlinks ours once
  // everyone has attached. `liveness_fds[r]` is a socket connected to global
  // rank r (or -1). Sets *out to null, without error, when some member could
  // not attach (then the caller uses TCP); every member reaches the same
  // verdict.
  static Status Create(Transport* transport, const std::vector<int>& members,
                       const std::vector<int>& liveness_fds,
                       const ShmConfig& config, std::unique_ptr<ShmGroup>* out);
  ~ShmGroup();

  int size() const { return static_cast<int>(members_.size()); }
  int index() const { return me_; }
  const std::vector<int>& members() const { return members_; }
  size_t region_bytes() const { return config_.region_bytes; }
  size_t seal_bytes() const { return config_.seal_bytes; }
  size_t stream_bytes() const { return config_.stream_bytes; }

  // Switches every region to its other half, unless the last step ended
  // with Seal. All members call both at the same points.
  void NextStep() {
    if (!sealed_) parity_ ^= 1;
    sealed_ = false;
  }
  // A barrier after the step's last read of the peers' regions: the next
  // step may write the same half again, which a large copy into it still
  // finds in cache (alternating halves doubles the memory a run of large
  // collectives cycles through).
  Status Seal() {
    Status st = Barrier();
    sealed_ = st.ok();
    return st;
  }
  // Member m's region, current half.
  char* region(int m) const;
  // Member m's board: board_bytes of memory beside the regions, zeroed at
  // creation, for a protocol of the user's own (ReadyBoard); null when
  // board_bytes is 0.
  char* board(int m) const;

  // Publishes that we are done with this phase and waits until every member
  // has done the same.
  Status Barrier();

  void Abort(const std::string& reason);

  // Whether `page` (kHeaderBytes long), the start of a peer's segment,
  // describes a segment of our layout: `members` members, regions of
  // `region_bytes` and boards of `board_bytes`. Its bytes are the peer's to
  // write, so nothing else in it is trusted before this passes.
  static constexpr size_t kHeaderBytes = 64;
  static Status CheckHeader(const void* page, int members, size_t region_bytes,
                            size_t board_bytes = 0);

  // Control-plane plumbing (see ShmLink): each member's doorbell, and a
  // byte ring from every member to every other, in the sender's segment.
  struct Ring {
    std::atomic<uint64_t>* head;  // bytes written, by the sender
    std::atomic<uint64_t>* tail;  // bytes consumed, by the receiver
    char* data;
    size_t capacity;
  };
  Doorbell* doorbell(int m) const;
  Ring ring(int from, int to) const;

 private:
  struct Control;
  ShmGroup() = default;
  Control* control(int m) const;
  Status WaitFor(int m, uint32_t target);
  Status PeerFailure(int m) const;

  std::vector<int> members_;
  int me_ = -1;
  std::vector<ShmSegment> segments_;  // by member index
  std::vector<int> liveness_fds_;     // by member index
  ShmConfig config_;
  AdaptiveSpin spin_;  // barrier waits
  int parity_ = 0;
  bool sealed_ = false;
  uint32_t seq_ = 0;
  std::atomic<bool> aborted_{false};
  mutable std::mutex reason_mu_;
  std::string reason_;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_SHM_GROUP_H_
