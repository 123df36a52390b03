#include "coordination/slot_lane.h"

#include <algorithm>

namespace horovod {

SlotLane::SlotLane(int slots, int ranks)
    : ranks_(std::max(ranks, 1)),
      words_((ranks_ + 63) / 64),
      state_(std::max(slots, 0)),
      bits_(state_.size() * words_, 0),
      blocked_(state_.size(), 0),
      where_(state_.size(), 0) {
  open_.reserve(state_.size());
}

bool SlotLane::Add(uint32_t slot, int rank, uint64_t order,
                   Clock::time_point now) {
  uint64_t& word = bits_[Word(slot, rank)];
  const uint64_t bit = uint64_t{1} << (rank % 64);
  if (word & bit) return false;
  word |= bit;
  Open& s = state_[slot];
  if (s.count == 0) {
    s.order = order;
    s.first_seen = now;
    where_[slot] = static_cast<uint32_t>(open_.size());
    open_.push_back(slot);
  }
  if (++s.count == ranks_) {
    s.complete_at = now;
    ++complete_;
  }
  return true;
}

void SlotLane::Close(uint32_t slot) {
  Open& s = state_[slot];
  if (s.count == 0) return;
  if (s.count == ranks_) --complete_;
  s.count = 0;
  std::fill_n(bits_.begin() + Word(slot, 0), words_, 0);
  // Swap-remove: the open list keeps no order (each slot has its own).
  const uint32_t i = where_[slot];
  const uint32_t last = open_.back();
  open_[i] = last;
  where_[last] = i;
  open_.pop_back();
}

}  // namespace horovod
