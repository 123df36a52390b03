// SlotLane: the coordinator's pending cache hits, addressed by slot. In
// steady state every rank names each tensor by its response-cache slot;
// the lane records, per slot, which ranks have named it, since when, and in
// what order the slots arrived, in arrays sized once for the cache's
// capacity. A hit adds a bit and a count: no name, no request, no
// allocation. The coordinator decides which hits may enter (see
// coordinator.h) and moves a slot out to its per-name table whenever a
// decision needs the full requests.
//
// Pure, owned by the coordinator; used by one thread.
#ifndef HOROVOD_COORDINATION_SLOT_LANE_H_
#define HOROVOD_COORDINATION_SLOT_LANE_H_

#include <cstdint>
#include <vector>

#include "common/deadline.h"

namespace horovod {

class SlotLane {
 public:
  // A lane for slots [0, slots) and ranks [0, ranks); a slot completes when
  // every rank has named it.
  SlotLane(int slots, int ranks);

  struct Open {
    uint64_t order = 0;  // the coordinator's submission order
    Clock::time_point first_seen;
    Clock::time_point complete_at;
    int count = 0;  // ranks that named it
  };

  int slots() const { return static_cast<int>(state_.size()); }
  // Records `rank`'s hit on `slot`. A slot's first hit takes `order`, which
  // the caller then uses up. False, with nothing recorded, when `rank`
  // already named `slot` while it is open.
  bool Add(uint32_t slot, int rank, uint64_t order, Clock::time_point now);
  bool Has(uint32_t slot, int rank) const {
    return (bits_[Word(slot, rank)] >> (rank % 64)) & 1;
  }
  bool IsOpen(uint32_t slot) const { return state_[slot].count > 0; }
  bool IsComplete(uint32_t slot) const { return state_[slot].count == ranks_; }
  const Open& at(uint32_t slot) const { return state_[slot]; }
  // Slots named by some rank and not closed since, in no particular order.
  const std::vector<uint32_t>& open() const { return open_; }
  size_t complete() const { return complete_; }
  // Forgets `slot` (executed, or moved to the table).
  void Close(uint32_t slot);

  // Per slot, how many entries of the coordinator's table stand for the
  // tensor the slot held when they were made: while any does, hits on the
  // slot go to the table, so one tensor never waits in both.
  void Block(uint32_t slot) { ++blocked_[slot]; }
  void Unblock(uint32_t slot) { --blocked_[slot]; }
  bool IsBlocked(uint32_t slot) const { return blocked_[slot] > 0; }

 private:
  size_t Word(uint32_t slot, int rank) const {
    return static_cast<size_t>(slot) * words_ + rank / 64;
  }

  int ranks_;
  int words_;  // per slot
  std::vector<Open> state_;
  std::vector<uint64_t> bits_;
  std::vector<int> blocked_;
  std::vector<uint32_t> open_;
  std::vector<uint32_t> where_;  // by slot: its index in open_
  size_t complete_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_SLOT_LANE_H_
