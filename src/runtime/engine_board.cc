// EngineImpl, the ready board: cached allreduces agreed among the ranks of
// one host without rank 0's round trip (ready_board.h has the protocol).
//
// Why executing a round never reorders anything: every rank runs the same
// response lists and the same agreed rounds in the same order. A round
// counts only when every rank posted it at the same epoch. Rank 0 emits no
// response list while its own round is open, so when a round agrees at
// epoch e, rank 0 read it back before emitting list e+1, and a worker that
// receives list e+1 finds the round complete (rank 0 saw every post before
// writing the list) and executes the round first. When rank 0 emitted list
// e+1 before posting, it posts at epoch e+1 or later and the round is
// discarded everywhere.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "collectives/reduce.h"
#include "runtime/engine_impl.h"

namespace horovod {

bool EngineImpl::BoardAllowed() const {
  // The autotuner tunes rank 0's cycle time and fusion threshold, which the
  // board would bypass.
  return knobs_.cache_capacity > 0 && !knobs_.autotune;
}

void EngineImpl::UseBoard() {
  if (!BoardAllowed()) return;
  const uint32_t capacity = static_cast<uint32_t>(knobs_.cache_capacity);
  if (job_.size == 1) {
    // Its own rounds agree as posted: cached tensors skip the coordinator's
    // per-name bookkeeping here as they do beside peers. Cache-line aligned
    // and zeroed, as a shared-memory board is (and so touched now rather
    // than on first use).
    solo_area_ = std::make_unique<Buffer>(ReadyBoard::AreaBytes());
    std::memset(solo_area_->data(), 0, solo_area_->size());
    board_ = std::make_unique<ReadyBoard>(
        std::vector<char*>{static_cast<char*>(solo_area_->data())}, 0, capacity,
        [](int) {});  // no other member to wake
    return;
  }
  if (shm_ == nullptr || shm_->size() != job_.size || bell_ == nullptr ||
      shm_->board(0) == nullptr)
    return;
  std::vector<char*> areas;
  for (int m = 0; m < shm_->size(); ++m) areas.push_back(shm_->board(m));
  board_ = std::make_unique<ReadyBoard>(
      std::move(areas), shm_->index(), capacity,
      [shm = shm_.get()](int m) { shm->doorbell(m)->WakeSleepers(); });
}

bool EngineImpl::BoardEligible(const Request& r) const {
  return board_ != nullptr && r.op == Op::kAllreduce && r.process_set == 0 &&
         r.group_size == 0 && r.device < 0 && r.reduce_op != ReduceOp::kAdasum;
}

bool EngineImpl::SendUsually(const Request& r, int slot, RequestList* list) {
  if (slot >= 0) {
    list->cache_hits.push_back(static_cast<uint32_t>(slot));
    // Rank 0's hits go to its coordinator at the epoch they were found at,
    // so they are never stale and never resent. The key is written into
    // the string the slot's last hit left.
    if (job_.rank != 0) {
      const size_t at = static_cast<size_t>(slot);
      if (at >= hit_keys_.size()) hit_keys_.resize(at + 1);
      TensorKey(r.process_set, r.name, &hit_keys_[at]);
    }
    return true;
  }
  list->requests.push_back(r);
  return false;
}

int EngineImpl::BoardDueMs(Clock::time_point now) const {
  // The loop's wait checks the same news as it waits (BoardNews).
  if (BoardNews()) return 0;
  if (board_ == nullptr || board_->open()) return 1000;
  // offers_ keeps arrival order: the first has waited longest. One a lean
  // step filed is stamped by the next BoardPost, at once.
  if (!offers_.empty() && offers_.front().since == kUnread) return 0;
  Clock::time_point due = offers_.empty()
                              ? Clock::time_point::max()
                              : offers_.front().since + kBoardPatience;
  // Behind, and already noticed (BoardNews reads the board only when not).
  if (behind_since_ != Clock::time_point::max() && board_->Behind())
    due = std::min(due, behind_since_ + kBoardJoinGrace);
  if (due == Clock::time_point::max()) return 1000;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(due - now);
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1000));
}

bool EngineImpl::BoardNews() const {
  if (board_ == nullptr) return false;
  if (board_->open()) return board_->Readable();
  return behind_since_ == Clock::time_point::max() && board_->Behind();
}

Status EngineImpl::BoardComplete() {
  if (board_ == nullptr || !board_->open()) return Status::OK();
  bool complete = false;
  HVD_RETURN_IF_ERROR(board_->Poll(&complete, &board_result_));
  if (!complete) return Status::OK();
  if (!board_result_.agreed) {
    board_news_ = !offers_.empty();  // try again at the common epoch
    return Status::OK();
  }
  return ExecuteBoard(board_result_);
}

void EngineImpl::OrderOffersBySlot() {
  const size_t n = offers_.size();
  posted_.resize(n);
  // A step submits its tensors in the order their slots were given (in
  // the order they were first executed): usually in order already.
  size_t ascending = 1;
  while (ascending < n && offers_[ascending - 1].slot < offers_[ascending].slot)
    ++ascending;
  if (ascending >= n) {
    std::iota(posted_.begin(), posted_.end(), size_t{0});
    return;
  }
  const size_t slots = static_cast<size_t>(cache_.capacity());
  if (slots > 16 * n) {  // few offers: sort them
    for (size_t i = 0; i < n; ++i) posted_[i] = i;
    std::sort(posted_.begin(), posted_.end(), [this](size_t a, size_t b) {
      return offers_[a].slot < offers_[b].slot;
    });
    return;
  }
  // A step's worth: counted into place, linear in the slots.
  slot_starts_.assign(slots + 1, 0);
  for (const BoardOffer& o : offers_) ++slot_starts_[o.slot + 1];
  for (size_t s = 0; s < slots; ++s) slot_starts_[s + 1] += slot_starts_[s];
  for (size_t i = 0; i < n; ++i) posted_[slot_starts_[offers_[i].slot]++] = i;
}

void EngineImpl::BoardPost(RequestList* list, Clock::time_point now,
                           bool eager) {
  if (board_ == nullptr || board_->open()) return;
  // Offers whose slot changed since the lookup, that waited too long, or
  // that another rank gave up on go the usual way (looked up again: the
  // slot may hold another tensor).
  // A lean step (`now` unread) checks no patience, and leaves the offers
  // it filed for the next full step to stamp.
  const bool timed = now != kUnread;
  const bool marked = board_->PeersMarked();
  size_t kept = 0;  // offers_ compacted in place
  for (size_t i = 0; i < offers_.size(); ++i) {
    BoardOffer& o = offers_[i];
    if (timed && o.since == kUnread) o.since = now;
    const bool stale =
        !cache_.Has(o.slot) || cache_.ChangedAt(o.slot) > o.found_at;
    const bool overdue = !stale && timed && now - o.since >= kBoardPatience;
    if (overdue) {
      board_->MarkSentUsually(o.slot, epoch_);
      board_overdue_.Add(1);
    }
    if (stale || overdue || (marked && board_->PeerSentUsually(o.slot))) {
      SendUsually(o.request(), stale ? cache_.Find(o.request()) : o.slot, list);
      continue;
    }
    if (kept != i) offers_[kept] = o;  // a steady step keeps every offer
    ++kept;
  }
  offers_.resize(kept);
  const bool behind = board_->Behind();
  if (!behind) behind_since_ = Clock::time_point::max();
  if (behind && behind_since_ == Clock::time_point::max() && timed)
    behind_since_ = now;
  const bool join =
      behind && (!offers_.empty() || eager ||
                 (timed && now - behind_since_ >= kBoardJoinGrace));
  if (!(board_news_ && !offers_.empty()) && !join) return;
  behind_since_ = Clock::time_point::max();
  OrderOffersBySlot();
  if (posted_.size() > ReadyBoard::kMaxSlots)
    posted_.resize(ReadyBoard::kMaxSlots);
  post_.resize(posted_.size());
  for (size_t k = 0; k < posted_.size(); ++k)
    post_[k] = {offers_[posted_[k]].slot, offers_[posted_[k]].carry};
  board_->Post(
      epoch_, knobs_.fusion_threshold, post_, [this](size_t k, char* dst) {
        const BoardOffer& o = offers_[posted_[k]];
        std::memcpy(dst, o.operand(), o.carry);
        const Request& r = o.request();
        if (r.prescale != 1.0)
          ScaleBuffer(dst,
                      static_cast<int64_t>(o.carry / DataTypeSize(r.dtype)),
                      r.dtype, r.prescale);
      });
  board_news_ = false;
}

bool EngineImpl::Repeats(const BoardFusion& f,
                         const ReadyBoard::Result& result) const {
  if (!f.valid || f.cache_version != cache_.version() ||
      f.fusion_threshold != result.fusion_threshold || f.slots != result.slots)
    return false;
  for (size_t k = 0; k < result.slots.size(); ++k)
    if ((result.carried_bytes[k] > 0) != (f.target[k] < 0)) return false;
  return true;
}

EngineImpl::BoardFusion& EngineImpl::FusionFor(const ReadyBoard::Result& result,
                                               bool traced, bool* again) {
  // A round of small tensors alone (a lone scalar's) is reduced from the
  // boards: nothing to fuse, nothing to build.
  *again = true;
  if (std::find(result.carried_bytes.begin(), result.carried_bytes.end(), 0u) ==
      result.carried_bytes.end())
    return unfused_;
  *again = false;
  BoardFusion* pick = &fusions_[0];
  for (BoardFusion& f : fusions_) {
    if (!traced && Repeats(f, result)) {
      *again = true;
      pick = &f;
      break;
    }
    if (f.last_use < pick->last_use) pick = &f;
  }
  pick->last_use = ++fusion_clock_;
  if (*again) {
    for (size_t t = 0; t < pick->bytes.size(); ++t) pick->entries[t].clear();
    return *pick;
  }
  pick->bytes.clear();
  pick->target.clear();
  // A traced round's responses carry names, which an untraced one would
  // not refill.
  pick->valid = !traced;
  pick->slots = result.slots;
  pick->cache_version = cache_.version();
  pick->fusion_threshold = result.fusion_threshold;
  return *pick;
}

Status EngineImpl::ExecuteBoard(const ReadyBoard::Result& result) {
  // The agreed slots are a subset of what we posted, both ascending. Their
  // records are claimed at once and run by address, never looked up by
  // name. The fused responses are a BoardFusion's: the first
  // f.bytes.size() of its responses are this round's, f.elements[t].size()
  // tensors each.
  const size_t n = result.slots.size();
  // A steady round agrees on every offer, each posted: the search finds
  // each at once, and no record of what was taken is needed.
  const bool all = n == posted_.size() && n == offers_.size();
  if (!all) taken_.assign(offers_.size(), 0);
  agreed_.resize(n);
  size_t p = 0;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t slot = result.slots[k];
    while (p < posted_.size() && offers_[posted_[p]].slot < slot) ++p;
    if (p == posted_.size() || offers_[posted_[p]].slot != slot)
      return Status::Internal("ready board agreed on slot " +
                              std::to_string(slot) + " that rank " +
                              std::to_string(job_.rank) + " did not post");
    if (!all) taken_[posted_[p]] = 1;
    agreed_[k] = offers_[posted_[p]].tensor;
  }
  queue_.Claim(agreed_.data(), agreed_.size(), &claimed_);
  // The entries run by address: names are copied only to be traced.
  const bool traced = timeline_.active();
  bool again;
  BoardFusion& f = FusionFor(result, traced, &again);
  for (size_t k = 0; k < result.slots.size(); ++k) {
    const uint32_t slot = result.slots[k];
    if (result.carried_bytes[k] > 0) {
      const Response& c = cache_.Get(slot);
      if (traced) timeline_.OpStart(c.names[0], UpperOpName(c.op));
      executor_->ReduceCopies(
          c, claimed_[k], &result.payloads[k * result.members], result.members);
      if (traced) timeline_.OpEnd(c.names[0]);
      cache_.Touch(slot);
      if (!again) f.target.push_back(-1);
      continue;
    }
    if (again) {
      f.entries[static_cast<size_t>(f.target[k])].push_back(claimed_[k]);
      continue;
    }
    const Response& c = cache_.Get(slot);
    if (traced) timeline_.OpStart(c.names[0], UpperOpName(c.op));
    const int64_t bytes = TensorBytes(c.dtype, c.shapes[0]);
    int t =
        FusionTarget(f.responses, f.bytes, c, bytes, result.fusion_threshold);
    if (t < 0) {
      t = static_cast<int>(f.bytes.size());
      if (f.responses.size() <= static_cast<size_t>(t)) {
        f.responses.emplace_back();
        f.entries.emplace_back();
        f.elements.emplace_back();
      }
      // Never grouped (BoardEligible): no groups to keep.
      AssignParams(&f.responses[t], c);
      f.responses[t].groups.clear();
      f.entries[t].clear();
      f.elements[t].clear();
      f.bytes.push_back(0);
    }
    const size_t at = f.elements[t].size();  // the tensor's place in t
    if (traced)
      PlaceTensor(&f.responses[t], at, c, slot, &board_spares_);
    else
      PlaceShape(&f.responses[t], at, c, slot, &board_spares_);
    f.entries[t].push_back(claimed_[k]);
    f.elements[t].push_back(bytes /
                            static_cast<int64_t>(DataTypeSize(c.dtype)));
    f.bytes[t] += bytes;
    f.target.push_back(t);
  }
  if (!again)
    for (size_t t = 0; t < f.bytes.size(); ++t)
      TrimTensors(&f.responses[t], f.elements[t].size(), &board_spares_);
  if (all) {
    offers_.clear();
  } else {
    size_t kept = 0;
    for (size_t i = 0; i < offers_.size(); ++i)
      if (!taken_[i]) offers_[kept++] = offers_[i];
    offers_.resize(kept);
  }
  Status st;
  for (size_t t = 0; t < f.bytes.size(); ++t) {
    const Response& r = f.responses[t];
    if (!st.ok()) {  // the job failed: these never ran
      for (TensorEntry* e : f.entries[t])
        if (e != nullptr) executor_->Abandon(e);
      continue;
    }
    st = executor_->AllreduceEntries(r, f.entries[t].data(),
                                     f.elements[t].data());
    if (traced)
      for (const std::string& name : r.names) timeline_.OpEnd(name);
    // Every tensor came from its slot's entry this round.
    if (st.ok())
      for (uint32_t slot : r.slots) cache_.Touch(slot);
  }
  queue_.Release(agreed_.data(), agreed_.size());
  if (!st.ok()) return RootCause(st);
  if (!result.slots.empty()) step_metrics_.cycles += 1;
  return Status::OK();
}

}  // namespace horovod
