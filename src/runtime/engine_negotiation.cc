// EngineImpl, negotiation: rank 0's coordinator step, the workers' step,
// autotuning, and executing each response list (with stale-hit resends).
#include "runtime/engine_impl.h"

namespace horovod {

void EngineImpl::TickNegotiation(int rank, const RequestList& list) {
  if (!timeline_.active()) return;
  for (const Request& r : list.requests)
    timeline_.NegotiateTick(r.name, UpperOpName(r.op), rank);
  for (uint32_t slot : list.cache_hits) {
    if (!cache_.Has(slot)) continue;
    const Response& c = cache_.Get(slot);
    timeline_.NegotiateTick(c.names[0], UpperOpName(c.op), rank);
  }
}

RequestList EngineImpl::CollectRequests(Clock::time_point now) {
  RequestList list;
  list.epoch = epoch_;
  queue_.TakeNew(&fresh_);
  for (QueuedTensor* t : fresh_) {
    const Request& r = t->entry.request;
    // The slot found for this name's last submission stands while its
    // parameters and the slot are unchanged: no lookup by name.
    const bool known =
        t->cache_slot >= 0 &&
        cache_.Has(static_cast<uint32_t>(t->cache_slot)) &&
        cache_.ChangedAt(static_cast<uint32_t>(t->cache_slot)) <= t->found_at;
    if (!known) {
      t->cache_slot = cache_.Find(r);
      t->found_at = epoch_;
      t->board_carry = -1;
      if (t->cache_slot >= 0 && BoardEligible(r)) {
        const int64_t bytes = TensorBytes(r.dtype, r.shape);
        t->board_carry = bytes <= kBoardCarryBytes ? bytes : 0;
      }
    }
    if (t->cache_slot >= 0 && t->board_carry >= 0) {
      cache_hits_.Add(1);
      offers_.push_back({t, static_cast<uint32_t>(t->cache_slot), t->found_at,
                         now, static_cast<uint32_t>(t->board_carry)});
      board_news_ = true;
      continue;
    }
    const bool hit = SendUsually(r, t->cache_slot, &list);
    if (hit) named_by_slot_.push_back(t);
    if (job_.rank != 0) (hit ? cache_hits_ : cache_misses_).Add(1);
  }
  // Their responses will name them by slot: filed so, they are claimed
  // without a lookup by name.
  if (!named_by_slot_.empty()) {
    queue_.FileBySlot(named_by_slot_.data(), named_by_slot_.size());
    named_by_slot_.clear();
  }
  if (shutdown_requested_.load() && !shutdown_sent_) {
    list.shutdown = true;
    shutdown_sent_ = true;
  }
  TakeWaiting(&list, now);  // at kUnread no report is due
  return list;
}

Status EngineImpl::SendOwn(const RequestList& l, Clock::time_point now) {
  if (Empty(l)) return Status::OK();
  if (job_.rank == 0) {
    TickNegotiation(0, l);
    coordinator_->AddRequestList(0, l, now);
    return Status::OK();
  }
  Status st = control_[0]->WriteFrame(
      EncodeRequestList(l), Deadline::After(knobs_.operation_timeout_s));
  if (!st.ok()) return LostCoordinator(st);
  liveness_->Sent(now);
  return Status::OK();
}

bool EngineImpl::Empty(const RequestList& l) {
  return l.requests.empty() && l.cache_hits.empty() && !l.shutdown &&
         !l.waiting_update;
}

Status EngineImpl::CoordinatorStep(int max_wait_ms, Clock::time_point begin,
                                   bool* finished) {
  const int n = job_.size;
  auto now = begin;
  int timeout = max_wait_ms;
  auto wake = coordinator_->NextWake(now);
  if (wake != Clock::time_point::max())
    timeout = static_cast<int>(std::min<int64_t>(
        max_wait_ms,
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - now)
                .count() +
            1));
  // While our board round is open nothing goes out; the peers' posts ring.
  const bool held = board_ != nullptr && board_->open();
  if (coordinator_->ShouldEmit(now) && !held) timeout = 0;
  now = AwaitEvent(std::min({timeout, liveness_->WaitMs(now),
                             WaitReportDueMs(now), BoardDueMs(now)}),
                   begin);
  timeline_.MarkCycleStart();
  HVD_RETURN_IF_ERROR(SendOwn(CollectRequests(now), now));
  HVD_RETURN_IF_ERROR(BoardComplete());
  for (int r = 1; r < n; ++r) {
    if (!control_[r]->HasData()) continue;
    std::string frame;
    Status st = control_[r]->ReadFrame(
        kMaxControlFrame, Deadline::After(knobs_.operation_timeout_s), &frame);
    if (!st.ok()) return Disconnected(r, st);
    liveness_->Heard(r - 1, now);
    if (frame.empty()) continue;  // a heartbeat
    RequestList list;
    HVD_RETURN_IF_ERROR(DecodeRequestList(frame, n, &list));
    if (!list.abort_reason.empty())
      return Status::Aborted("rank " + std::to_string(r) +
                             " failed: " + list.abort_reason);
    TickNegotiation(r, list);
    coordinator_->AddRequestList(r, list, now);
  }
  for (const std::string& w : coordinator_->TakeStallWarnings(now))
    HVD_LOG(kWarning, w);
  if (board_ != nullptr && board_->open()) return CheckLiveness(now);
  bool emitted = false;
  if (coordinator_->ShouldEmit(now)) {
    HVD_RETURN_IF_ERROR(Emit(now, finished));
    if (*finished) return Status::OK();
    emitted = true;
  }
  RequestList late;
  late.epoch = epoch_;
  // Executing the list may have taken long.
  const auto later = emitted ? Clock::now() : now;
  BoardPost(&late, later, false);
  HVD_RETURN_IF_ERROR(SendOwn(late, later));
  // Posting last completes the round: finish it in this step.
  HVD_RETURN_IF_ERROR(BoardComplete());
  return CheckLiveness(later);
}

Status EngineImpl::Emit(Clock::time_point now, bool* finished) {
  const int n = job_.size;
  ResponseList& out = emitted_;  // refilled in place
  coordinator_->TakeResponses(now, &out);
  // The coordinator gives each response its slots when all its tensors are
  // cached (ResponseFill), so it travels as slot numbers.
  out.small_allreduce_bytes = tuned_small_allreduce_bytes_;
  tuned_small_allreduce_bytes_ = -1;
  if (timeline_.active())
    for (const Response& r : out.responses)
      for (const std::string& name : r.names)
        timeline_.OpStart(name, UpperOpName(r.op));
  std::string frame = EncodeResponseList(out, &cache_);
  // Every worker must have the whole list before we wait for it inside
  // a collective.
  for (int r = 1; r < n; ++r) {
    Status st = control_[r]->WriteFrame(
        frame, Deadline::After(knobs_.operation_timeout_s));
    if (!st.ok()) return Disconnected(r, st);
  }
  liveness_->Sent(now);
  for (int r = 1; r < n; ++r) {
    Status st = control_[r]->Drain(Deadline::After(knobs_.operation_timeout_s));
    if (!st.ok()) return Disconnected(r, st);
  }
  Status st = ExecuteList(out);
  if (!st.ok()) return RootCause(st);
  *finished = out.shutdown;
  if (tuner_ != nullptr && !out.shutdown) Tune(out);
  return Status::OK();
}

void EngineImpl::Tune(const ResponseList& list) {
  int64_t bytes = 0;
  for (const Response& r : list.responses) {
    if (r.error || !MovesData(r.op)) continue;
    for (const auto& shape : r.shapes) bytes += TensorBytes(r.dtype, shape);
  }
  if (!tuner_->Record(bytes, Clock::now())) return;
  const TunedParams& p = tuner_->params();
  coordinator_->SetTuning(p.fusion_threshold, p.cycle_time_ms / 1000.0);
  tuned_small_allreduce_bytes_ = p.small_allreduce_bytes;
}

Status EngineImpl::WorkerStep(int max_wait_ms, Clock::time_point begin,
                              bool* finished) {
  ControlLink& ctl = *control_[0];
  const auto now =
      AwaitEvent(std::min({max_wait_ms, liveness_->WaitMs(begin),
                           WaitReportDueMs(begin), BoardDueMs(begin)}),
                 begin);
  const RequestList mine = CollectRequests(now);
  HVD_RETURN_IF_ERROR(SendOwn(mine, now));
  HVD_RETURN_IF_ERROR(BoardComplete());
  Status st;
  std::string frame;
  while (frame.empty() && ctl.HasData()) {  // empty frames are heartbeats
    st = ctl.ReadFrame(kMaxControlFrame,
                       Deadline::After(knobs_.operation_timeout_s), &frame);
    if (!st.ok()) return LostCoordinator(st);
    liveness_->Heard(0, now);
  }
  if (!frame.empty()) {
    // Decoded into the last list's responses (see DecodeResponseList).
    ResponseList& list = received_;
    HVD_RETURN_IF_ERROR(DecodeResponseList(frame, job_.size, &cache_, &list));
    if (!list.abort_reason.empty()) return Status::Aborted(list.abort_reason);
    // A round rank 0 read back before writing this list comes first (see
    // engine_board.cc); the list's arrival makes it visible.
    HVD_RETURN_IF_ERROR(BoardComplete());
    st = ExecuteList(list);
    if (!st.ok()) return RootCause(st);
    *finished = list.shutdown;
    if (*finished) return Status::OK();
  }
  RequestList late;
  late.epoch = epoch_;
  // Executing a list may have taken long.
  const auto later = frame.empty() ? now : Clock::now();
  BoardPost(&late, later, !Empty(mine));
  HVD_RETURN_IF_ERROR(SendOwn(late, later));
  // Posting last completes the round: finish it in this step (completing a
  // round early never reorders it against a response list).
  HVD_RETURN_IF_ERROR(BoardComplete());
  if (!frame.empty()) return Status::OK();
  st = CheckLiveness(now);
  // Rank 0 may be silent because it is itself held up by a peer that
  // stopped: its verdict, if it comes within a second, names that peer.
  if (!st.ok()) return FromCoordinator(st, true);
  return Status::OK();
}

Status EngineImpl::ExecuteList(const ResponseList& list) {
  const auto start = Clock::now();
  ++epoch_;
  if (!list.responses.empty()) step_metrics_.cycles += 1;
  if (list.small_allreduce_bytes >= 0)
    executor_->SetSmallAllreduceBytes(list.small_allreduce_bytes);
  // A response that travels as slots was built from the cache as it stood
  // when the list was made (placed from its entries, or given slots only
  // where an entry matched): until a Put in this list changes the cache,
  // its slots are refreshed with nothing to compare.
  bool changed = false;
  for (const Response& r : list.responses) {
    Status st = executor_->Execute(r);
    if (timeline_.active())
      for (const std::string& name : r.names) timeline_.OpEnd(name);
    HVD_RETURN_IF_ERROR(st);
    // Every rank applies the same Puts in the same order: caches agree.
    const bool by_slot = r.slots.size() == r.names.size();
    const size_t cached = ResponseCache::Cacheable(r) ? r.names.size() : 0;
    for (size_t i = 0; i < cached; ++i) {
      if (by_slot && !changed) {
        cache_.Touch(r.slots[i]);
      } else if (!by_slot || !cache_.Refresh(r.slots[i], r, i)) {
        cache_.Put(r, i, epoch_);
        changed = true;
      }
    }
    if (board_ != nullptr)
      for (uint32_t slot : r.slots) board_->NoteExecuted(slot, epoch_);
  }
  // Hits the coordinator could not trust go again in full.
  std::vector<Request> resend;
  for (auto& s : list.stale_hits) {
    if (s.first != job_.rank) continue;
    Request r;
    if (s.second < hit_keys_.size() && !hit_keys_[s.second].empty() &&
        queue_.Find(hit_keys_[s.second], &r))
      resend.push_back(r);
  }
  if (!resend.empty()) {
    RequestList l;
    l.epoch = epoch_;
    l.requests = resend;
    HVD_RETURN_IF_ERROR(control_[0]->WriteFrame(
        EncodeRequestList(l), Deadline::After(knobs_.operation_timeout_s)));
  }
  const auto end = Clock::now();
  liveness_->Busy(end - start, end);
  return Status::OK();
}

}  // namespace horovod
