// Coordinator, the slot lane: cache hits agreed by slot, and moving a slot
// to the per-name table when a decision needs its requests.
#include <algorithm>

#include "coordination/coordinator.h"

namespace horovod {

bool Coordinator::TryLane(uint32_t slot, int rank, Clock::time_point now) {
  if (static_cast<int>(slot) >= lane_.slots() || any_joined_ ||
      waiting_ranks_ > 0 || lane_.IsBlocked(slot))
    return false;
  const Response& c = cache_->Get(slot);
  if (c.process_set != 0 || !c.groups.empty()) return false;
  if (!lane_.Add(slot, rank, next_order_, now)) {
    // Named twice while open: the table keeps what it always did.
    MoveToTable(slot);
    return false;
  }
  if (lane_.at(slot).count == 1) ++next_order_;
  return true;
}

void Coordinator::MoveToTable(uint32_t slot) {
  if (!lane_.IsOpen(slot)) return;
  const SlotLane::Open open = lane_.at(slot);
  Pending* p = nullptr;
  for (int r = 0; r < config_.size; ++r) {
    if (!lane_.Has(slot, r)) continue;
    Request q = cache_->ToRequest(slot, r);
    bool made = false;
    if (p == nullptr)
      p = &EntryFor(q.Key(), open.first_seen, open.order,
                    static_cast<int>(slot), &made);
    p->have[r] = true;
    p->requests[r] = std::move(q);
  }
  lane_.Close(slot);
  // Otherwise RefreshCompleteness decides (a joined rank may complete it).
  if (p != nullptr && open.count == config_.size && !p->complete) {
    p->complete = true;
    p->complete_at = open.complete_at;
  }
}

void Coordinator::MoveAllToTable() {
  while (!lane_.open().empty()) MoveToTable(lane_.open().back());
}

void Coordinator::MoveOlderThan(Clock::time_point now, double seconds) {
  const auto& open = lane_.open();
  // Backwards: removing slot i moves the last one, already seen, into i.
  for (size_t i = open.size(); i-- > 0;) {
    const uint32_t s = open[i];
    if (lane_.IsComplete(s)) continue;
    if (std::chrono::duration<double>(now - lane_.at(s).first_seen).count() >=
        seconds)
      MoveToTable(s);
  }
}

Coordinator::LaneReadiness Coordinator::LaneState(Clock::time_point now) const {
  LaneReadiness out;
  for (uint32_t s : lane_.open()) {
    const SlotLane::Open& o = lane_.at(s);
    if (!lane_.IsComplete(s)) {
      out.incomplete = true;
      out.stalled =
          out.stalled ||
          (config_.stall_shutdown_s > 0 &&
           std::chrono::duration<double>(now - o.first_seen).count() >=
               config_.stall_shutdown_s);
      continue;
    }
    out.complete = true;
    out.oldest = std::min(out.oldest, o.complete_at);
    const Response& c = cache_->Get(s);
    out.ready_bytes += TensorBytes(c.dtype, c.shapes[0]);
  }
  return out;
}

}  // namespace horovod
