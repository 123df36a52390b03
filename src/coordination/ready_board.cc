#include "coordination/ready_board.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

namespace horovod {

// One round's content. Its first cache line holds the round number, the
// counts and the first entries, and the carried bytes follow right after
// the entries, so a round of one small tensor is a single line: a peer
// reading it takes one cache miss, and the poster one ownership transfer.
// Entries are (slot, carried bytes) pairs.
struct ReadyBoard::Half {
  std::atomic<uint64_t> round;  // the round this half holds; written last
  uint64_t epoch;
  int64_t fusion_threshold;
  uint32_t count;
  uint32_t payload_bytes;
  // count pairs, then payload_bytes bytes; the last 8 words pad the half
  // to whole cache lines
  uint32_t entries[2 * kMaxSlots + kPayloadBytes / 4 + 8];

  char* payload() { return reinterpret_cast<char*>(entries + 2 * count); }
  const char* payload() const {
    return reinterpret_cast<const char*>(entries + 2 * count);
  }
};

size_t ReadyBoard::AreaBytes() {
  // Each half starts a cache line (areas do).
  static_assert(sizeof(Half) % 64 == 0, "halves are whole cache lines");
  // The marks, then a line that starts with how many marks were made.
  return 2 * sizeof(Half) + kMarks * sizeof(std::atomic<uint64_t>) + 64;
}

ReadyBoard::ReadyBoard(std::vector<char*> areas, int me, uint32_t capacity,
                       std::function<void(int)> wake)
    : areas_(std::move(areas)),
      me_(me),
      capacity_(capacity),
      wake_(std::move(wake)),
      cursor_(areas_.size()),
      offset_(areas_.size()),
      executed_(kMarks, 0) {
  static_assert(std::atomic<uint64_t>::is_always_lock_free,
                "the round counter is shared between processes");
}

ReadyBoard::Half* ReadyBoard::half(int m, uint64_t round) const {
  return reinterpret_cast<Half*>(areas_[m]) + (round & 1);
}

std::atomic<uint64_t>* ReadyBoard::marks(int m) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(areas_[m] + 2 * sizeof(Half));
}

void ReadyBoard::MarkSentUsually(uint32_t slot, uint64_t epoch) {
  marks(me_)[slot % kMarks].store(epoch + 1, std::memory_order_relaxed);
  std::atomic<uint64_t>& made = marks(me_)[kMarks];
  made.store(made.load(std::memory_order_relaxed) + 1,
             std::memory_order_relaxed);
}

bool ReadyBoard::PeersMarked() const {
  for (int m = 0; m < size(); ++m)
    if (m != me_ && marks(m)[kMarks].load(std::memory_order_relaxed) > 0)
      return true;
  return false;
}

void ReadyBoard::NoteExecuted(uint32_t slot, uint64_t epoch) {
  executed_[slot % kMarks] = epoch;
}

bool ReadyBoard::PeerSentUsually(uint32_t slot) const {
  const size_t i = slot % kMarks;
  for (int m = 0; m < size(); ++m)
    if (m != me_ && marks(m)[i].load(std::memory_order_relaxed) > executed_[i])
      return true;
  return false;
}

// A member is at most one round ahead of us (it posts round k + 1 only
// after reading our round k), so each half holds either the round its parity
// expects or the one two before.
bool ReadyBoard::Behind() const {
  for (int m = 0; m < size(); ++m)
    if (m != me_ &&
        half(m, posted_ + 1)->round.load(std::memory_order_seq_cst) > posted_)
      return true;
  return false;
}

void ReadyBoard::Post(uint64_t epoch, int64_t fusion_threshold,
                      const std::vector<Offer>& offers,
                      const std::function<void(size_t, char*)>& fill) {
  const uint64_t round = posted_ + 1;
  Half* h = half(me_, round);
  h->epoch = epoch;
  h->fusion_threshold = fusion_threshold;
  const size_t n = std::min(offers.size(), kMaxSlots);
  h->count = static_cast<uint32_t>(n);
  char* payload = h->payload();
  uint32_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bytes = offers[i].bytes;
    if (bytes > kPayloadBytes - used) bytes = 0;  // goes by collective
    h->entries[2 * i] = offers[i].slot;
    h->entries[2 * i + 1] = bytes;
    if (bytes > 0) {
      fill(i, payload + used);
      used += bytes;
    }
  }
  h->payload_bytes = used;
  // Sequentially consistent: peers are woken only when they sleep
  // (Doorbell::WakeSleepers), and an awake one checks this as it waits.
  h->round.store(round, std::memory_order_seq_cst);
  posted_ = round;
  for (int m = 0; m < size(); ++m)
    if (m != me_) wake_(m);
}

Status ReadyBoard::Check(int m, const Half& h) const {
  auto bad = [&](const std::string& what) {
    return Status::Internal("shared-memory ready board of member " +
                            std::to_string(m) + " is malformed: " + what);
  };
  if (h.count > kMaxSlots) return bad("count " + std::to_string(h.count));
  if (h.payload_bytes > kPayloadBytes)
    return bad("payload " + std::to_string(h.payload_bytes));
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const uint32_t slot = h.entries[2 * i];
    if (slot >= capacity_ || (i > 0 && slot <= h.entries[2 * i - 2]))
      return bad("slot " + std::to_string(slot));
    bytes += h.entries[2 * i + 1];
  }
  if (bytes != h.payload_bytes) return bad("payload lengths");
  return Status::OK();
}

bool ReadyBoard::SameList(const Half& h, const Half& mine) {
  return h.count == mine.count && h.payload_bytes == mine.payload_bytes &&
         std::memcmp(h.entries, mine.entries,
                     2 * sizeof(uint32_t) * mine.count) == 0;
}

void ReadyBoard::TakeList(const Half& mine, uint64_t round, Result* out) {
  // Every member's payloads lie at the same offsets as ours. The vectors
  // keep their sizes from the last round, as long as a steady step's: no
  // work to resize them. Every payload is null until set.
  const int n = size();
  const uint32_t count = mine.count;
  out->slots.resize(count);
  out->carried_bytes.resize(count);
  out->payloads.resize(static_cast<size_t>(count) * n);
  std::fill(out->payloads.begin(), out->payloads.end(), nullptr);
  uint32_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t carried = mine.entries[2 * i + 1];
    out->slots[i] = mine.entries[2 * i];
    out->carried_bytes[i] = carried;
    if (carried == 0) continue;
    const char** payload = &out->payloads[static_cast<size_t>(i) * n];
    for (int m = 0; m < n; ++m) payload[m] = half(m, round)->payload() + offset;
    offset += carried;
  }
}

bool ReadyBoard::Readable() const {
  if (!open()) return false;
  for (int m = 0; m < size(); ++m)
    if (half(m, posted_)->round.load(std::memory_order_seq_cst) < posted_)
      return false;
  return true;
}

Status ReadyBoard::Poll(bool* complete, Result* out) {
  *complete = false;
  if (!Readable()) return Status::OK();
  const uint64_t round = posted_;
  const int n = size();
  // A peer that posted exactly our list (the steady state) needs no check
  // of its own: ours bounds it.
  const Half& mine = *half(me_, round);
  HVD_RETURN_IF_ERROR(Check(me_, mine));
  bool same = true;
  for (int m = 0; m < n; ++m) {
    if (m == me_ || SameList(*half(m, round), mine)) continue;
    same = false;
    HVD_RETURN_IF_ERROR(Check(m, *half(m, round)));
  }
  read_ = round;
  *complete = true;
  out->members = n;
  out->fusion_threshold = half(0, round)->fusion_threshold;
  out->agreed = true;
  for (int m = 1; m < n; ++m)
    if (half(m, round)->epoch != half(0, round)->epoch) out->agreed = false;
  if (out->agreed && same) {
    TakeList(mine, round, out);
    return Status::OK();
  }
  out->slots.clear();
  out->carried_bytes.clear();
  out->payloads.clear();
  if (!out->agreed) return Status::OK();
  // Merge: walk our list; a slot counts when every other list has it.
  std::fill(cursor_.begin(), cursor_.end(), 0);
  std::fill(offset_.begin(), offset_.end(), 0);
  for (uint32_t i = 0; i < mine.count; ++i) {
    const uint32_t slot = mine.entries[2 * i];
    bool everywhere = true;
    for (int m = 0; m < n && everywhere; ++m) {
      const Half& h = *half(m, round);
      while (cursor_[m] < h.count && h.entries[2 * cursor_[m]] < slot) {
        offset_[m] += h.entries[2 * cursor_[m] + 1];
        ++cursor_[m];
      }
      everywhere = cursor_[m] < h.count && h.entries[2 * cursor_[m]] == slot;
    }
    if (!everywhere) continue;
    uint32_t carried = mine.entries[2 * i + 1];
    for (int m = 0; m < n; ++m)
      if (half(m, round)->entries[2 * cursor_[m] + 1] != carried) carried = 0;
    out->slots.push_back(slot);
    out->carried_bytes.push_back(carried);
    for (int m = 0; m < n; ++m)
      out->payloads.push_back(
          carried > 0 ? half(m, round)->payload() + offset_[m] : nullptr);
  }
  return Status::OK();
}

}  // namespace horovod
