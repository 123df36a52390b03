#include "coordination/coordinator.h"

#include <algorithm>
#include <set>

namespace horovod {

std::string Coordinator::RankList(const std::vector<int>& ranks) {
  return ShapeString(std::vector<int64_t>(ranks.begin(), ranks.end()));
}

const Request& Coordinator::First(const Pending& p) {
  for (size_t i = 0; i < p.have.size(); ++i)
    if (p.have[i]) return p.requests[i];
  return p.requests[0];
}

Coordinator::Coordinator(const CoordinatorConfig& config,
                         const ResponseCache* cache)
    : config_(config),
      cache_(cache),
      lane_(cache != nullptr ? cache->capacity() : 0, config.size),
      joined_(config.size, false),
      waiting_(config.size) {
  std::vector<int> all(config.size);
  for (int i = 0; i < config.size; ++i) all[i] = i;
  process_sets_[0] = all;
}

const std::vector<int>* Coordinator::Members(int process_set) const {
  auto it = process_sets_.find(process_set);
  return it == process_sets_.end() ? nullptr : &it->second;
}

void Coordinator::AddRequestList(int rank, const RequestList& list,
                                 Clock::time_point now) {
  for (const Request& r : list.requests) {
    Request q = r;
    q.rank = rank;  // a rank speaks only for itself
    AddRequest(std::move(q), now);
  }
  for (uint32_t slot : list.cache_hits) {
    if (cache_ == nullptr || !cache_->Has(slot) ||
        cache_->ChangedAt(slot) > list.epoch) {
      stale_.emplace_back(rank, slot);
      continue;
    }
    if (!TryLane(slot, rank, now))
      AddRequest(cache_->ToRequest(slot, rank), now, static_cast<int>(slot));
  }
  if (list.shutdown) shutdown_ranks_.insert(rank);
  if (list.waiting_update) {
    waiting_[rank] = list.waiting;
    waiting_ranks_ = static_cast<int>(std::count_if(
        waiting_.begin(), waiting_.end(),
        [](const std::vector<std::string>& w) { return !w.empty(); }));
    // Deadlock detection reads the table.
    if (waiting_ranks_ > 0) MoveAllToTable();
  }
  RefreshCompleteness(now);
  FindDeadlock(now);
}

void Coordinator::AddRequest(Request r, Clock::time_point now, int slot) {
  if (r.op == Op::kJoin) {
    // A joined rank stands in for others' requests: the table decides.
    MoveAllToTable();
    any_joined_ = true;
    joined_[r.rank] = true;
    last_joined_ = r.rank;
    join_ready_ =
        std::all_of(joined_.begin(), joined_.end(), [](bool b) { return b; });
    return;
  }
  if (slot < 0 && lane_.slots() > 0)
    slot = cache_->SlotOf(r.process_set, r.name);
  if (slot >= 0 && lane_.IsOpen(static_cast<uint32_t>(slot)))
    MoveToTable(static_cast<uint32_t>(slot));
  bool made = false;
  Pending& p = EntryFor(r.Key(), now, next_order_, slot, &made);
  if (made) ++next_order_;
  const int rank = r.rank;
  p.have[rank] = true;
  p.requests[rank] = std::move(r);
}

bool Coordinator::Present(const Pending& p, int m) const {
  // A joined rank stands in for every collective (allreduce gets its zeros;
  // the others fail with a clear error rather than wait forever).
  return p.have[m] || (joined_[m] && First(p).op <= Op::kBarrier);
}

bool Coordinator::IsComplete(const Pending& p) const {
  const std::vector<int>* members = Members(First(p).process_set);
  if (members == nullptr) return true;  // reported as an error
  for (int m : *members)
    if (!Present(p, m)) return false;
  return true;
}

std::vector<int> Coordinator::Missing(const Pending& p) const {
  std::vector<int> missing;
  const Request* any = &First(p);
  const std::vector<int>* members = Members(any->process_set);
  if (members == nullptr) return missing;
  for (int m : *members)
    if (!p.have[m]) missing.push_back(m);
  return missing;
}

Coordinator::Pending& Coordinator::EntryFor(const std::string& key,
                                            Clock::time_point first_seen,
                                            uint64_t order, int slot,
                                            bool* made) {
  Pending& p = table_[key];
  *made = p.have.empty();
  if (!*made) return p;
  p.have.assign(config_.size, false);
  p.requests.resize(config_.size);
  p.first_seen = first_seen;
  p.order = order;
  if (slot >= 0 && slot < lane_.slots()) {
    p.lane_slot = slot;
    lane_.Block(static_cast<uint32_t>(slot));
  }
  return p;
}

void Coordinator::Erase(Table::iterator it) {
  if (it->second.lane_slot >= 0)
    lane_.Unblock(static_cast<uint32_t>(it->second.lane_slot));
  table_.erase(it);
}

void Coordinator::RefreshCompleteness(Clock::time_point now) {
  for (auto& kv : table_) {
    if (!kv.second.complete && IsComplete(kv.second)) {
      kv.second.complete = true;
      kv.second.complete_at = now;
    }
  }
}

bool Coordinator::ShouldEmit(Clock::time_point now) const {
  if (join_ready_ || !stale_.empty() || DeadlockDue(now)) return true;
  // One rank shutting down ends the job for all (as upstream): waiting for
  // the rest could hang them on collectives that rank will never join.
  if (!shutdown_ranks_.empty()) return true;
  const LaneReadiness lane = LaneState(now);
  if (lane.stalled) return true;
  bool any_incomplete = lane.incomplete;
  bool any_complete = lane.complete;
  int64_t ready_bytes = lane.ready_bytes;
  Clock::time_point oldest = lane.oldest;
  for (const auto& kv : table_) {
    const Pending& p = kv.second;
    if (!p.complete) {
      any_incomplete = true;
      if (config_.stall_shutdown_s > 0 &&
          std::chrono::duration<double>(now - p.first_seen).count() >=
              config_.stall_shutdown_s)
        return true;
      continue;
    }
    any_complete = true;
    oldest = std::min(oldest, p.complete_at);
    for (size_t i = 0; i < p.have.size(); ++i) {
      if (!p.have[i]) continue;
      int64_t n = static_cast<int64_t>(DataTypeSize(p.requests[i].dtype));
      for (int64_t d : p.requests[i].shape) n *= d;
      ready_bytes += n;
      break;
    }
  }
  if (!any_complete) return false;
  // Emit at once unless more tensors are known to be coming; then wait up
  // to one cycle so they can be fused with these.
  if (!any_incomplete) return true;
  if (ready_bytes >= config_.fusion_threshold) return true;
  return std::chrono::duration<double>(now - oldest).count() >=
         config_.cycle_time_s;
}

Clock::time_point Coordinator::After(Clock::time_point t, double s) {
  return t + std::chrono::duration_cast<Clock::duration>(
                 std::chrono::duration<double>(s));
}

Clock::time_point Coordinator::WakeFor(bool complete, bool warned,
                                       Clock::time_point first_seen,
                                       Clock::time_point complete_at) const {
  if (complete) return After(complete_at, config_.cycle_time_s);
  Clock::time_point wake = Clock::time_point::max();
  if (config_.stall_check && !warned)
    wake = std::min(wake, After(first_seen, config_.stall_check_s));
  if (config_.stall_shutdown_s > 0)
    wake = std::min(wake, After(first_seen, config_.stall_shutdown_s));
  return wake;
}

Clock::time_point Coordinator::NextWake(Clock::time_point now) const {
  Clock::time_point wake = Clock::time_point::max();
  if (!deadlocked_.empty())
    wake = std::min(wake, After(deadlock_since_, config_.deadlock_grace_s));
  for (const auto& kv : table_) {
    const Pending& p = kv.second;
    wake = std::min(wake,
                    WakeFor(p.complete, p.warned, p.first_seen, p.complete_at));
  }
  // Open slots are never warned: a warning moves them to the table.
  for (uint32_t s : lane_.open()) {
    const SlotLane::Open& o = lane_.at(s);
    wake = std::min(
        wake, WakeFor(lane_.IsComplete(s), false, o.first_seen, o.complete_at));
  }
  return std::max(wake, now);
}

std::vector<std::string> Coordinator::TakeStallWarnings(Clock::time_point now) {
  std::vector<std::string> out;
  if (!config_.stall_check) return out;
  MoveOlderThan(now, config_.stall_check_s);  // warned from the table
  for (auto& kv : table_) {
    Pending& p = kv.second;
    if (p.complete || p.warned) continue;
    double waited = std::chrono::duration<double>(now - p.first_seen).count();
    if (waited < config_.stall_check_s) continue;
    p.warned = true;
    const Request* any = &First(p);
    std::vector<int> ready;
    for (size_t i = 0; i < p.have.size(); ++i)
      if (p.have[i]) ready.push_back(static_cast<int>(i));
    out.push_back(
        "One or more tensors were submitted to be reduced, gathered "
        "or broadcasted by subset of ranks and are waiting for "
        "remainder of ranks for more than " +
        ScaleString(config_.stall_check_s) + " seconds. Tensor '" + any->name +
        "' (" + OpName(any->op) + ") is ready on ranks " + RankList(ready) +
        " and missing on ranks " + RankList(Missing(p)) + ".");
  }
  return out;
}

Response Coordinator::Validate(const Pending& p) {
  int first = 0;
  while (!p.have[first]) ++first;
  const Request& a = p.requests[first];
  Response resp = ResponseFor(a);
  auto fail = [&](const std::string& msg) {
    resp.error = true;
    resp.error_message = msg;
    resp.sizes.clear();
    return resp;
  };
  const std::vector<int>* members = Members(a.process_set);
  if (members == nullptr)
    return fail("process set " + std::to_string(a.process_set) +
                " is not registered");
  // Only failures spell these out: the common case allocates nothing.
  auto who = [&] { return "tensor '" + a.name + "'"; };
  auto at = [&](int r) { return "rank " + std::to_string(r); };
  for (int r = first; r < static_cast<int>(p.have.size()); ++r)
    if (p.have[r] && !p.requests[r].refusal.empty())
      return fail(std::string(OpName(p.requests[r].op)) + " of " + who() +
                  " was refused by " + at(r) + ": " + p.requests[r].refusal);
  const bool is_allreduce = a.op == Op::kAllreduce;
  const bool is_reducescatter = a.op == Op::kReducescatter;
  const bool gathers = a.op == Op::kAllgather || a.op == Op::kAlltoall;
  for (int r = first + 1; r < static_cast<int>(p.have.size()); ++r) {
    if (!p.have[r]) continue;
    const Request& b = p.requests[r];
    if (b.op != a.op)
      return fail(std::string("Mismatched operations for ") + who() + ": " +
                  at(first) + " requested " + OpName(a.op) + ", " + at(r) +
                  " requested " + OpName(b.op) + ".");
    if (b.dtype != a.dtype && a.op != Op::kBarrier)
      return fail("Mismatched data types for " + who() + ": " + at(first) +
                  " has " + DataTypeName(a.dtype) + ", " + at(r) + " has " +
                  DataTypeName(b.dtype) + ".");
    if ((is_allreduce || is_reducescatter) && b.reduce_op != a.reduce_op)
      return fail(std::string("Mismatched reduce operations for ") + who() +
                  ": " + at(first) + " uses " + ReduceOpName(a.reduce_op) +
                  ", " + at(r) + " uses " + ReduceOpName(b.reduce_op) + ".");
    if ((is_allreduce || is_reducescatter) &&
        (b.prescale != a.prescale || b.postscale != a.postscale))
      return fail("Mismatched prescale/postscale factors for " + who() + ": " +
                  at(first) + " has (" + ScaleString(a.prescale) + ", " +
                  ScaleString(a.postscale) + "), " + at(r) + " has (" +
                  ScaleString(b.prescale) + ", " + ScaleString(b.postscale) +
                  ").");
    if (a.op == Op::kRemoveProcessSet && b.set_id != a.set_id)
      return fail("Mismatched remove_process_set: " + at(first) +
                  " removes process set " + std::to_string(a.set_id) + ", " +
                  at(r) + " removes process set " + std::to_string(b.set_id) +
                  ".");
    if (a.op == Op::kAddProcessSet && b.set_ranks != a.set_ranks) {
      auto ranks = [](const Request& q) {
        return ShapeString(
            std::vector<int64_t>(q.set_ranks.begin(), q.set_ranks.end()));
      };
      return fail("Mismatched add_process_set: " + at(first) + " adds ranks " +
                  ranks(a) + ", " + at(r) + " adds ranks " + ranks(b) + ".");
    }
    if (a.op == Op::kBroadcast && b.root != a.root)
      return fail("Mismatched broadcast root ranks for " + who() + ": " +
                  at(first) + " uses root " + std::to_string(a.root) + ", " +
                  at(r) + " uses root " + std::to_string(b.root) + ".");
    if (b.device != a.device)
      return fail("Mismatched devices for " + who() + ": " + at(first) +
                  " has device " + std::to_string(a.device) + ", " + at(r) +
                  " has device " + std::to_string(b.device) + ".");
    if (gathers) {
      bool same = b.shape.size() == a.shape.size() && !a.shape.empty();
      for (size_t d = 1; same && d < a.shape.size(); ++d)
        same = a.shape[d] == b.shape[d];
      if (!same)
        return fail(std::string("Mismatched ") + OpName(a.op) +
                    " tensor shapes for " + who() + ": " + at(first) + " has " +
                    ShapeString(a.shape) + ", " + at(r) + " has " +
                    ShapeString(b.shape) +
                    " (all dimensions but the first must match).");
    } else if (b.shape != a.shape && a.op != Op::kBarrier) {
      return fail("Mismatched " + std::string(OpName(a.op)) +
                  " tensor shapes for " + who() + ": " + at(first) + " has " +
                  ShapeString(a.shape) + ", " + at(r) + " has " +
                  ShapeString(b.shape) + ".");
    }
  }
  // Joined members have no data to gather, broadcast or exchange.
  if (!is_allreduce && a.op != Op::kBarrier) {
    for (int m : *members)
      if (!p.have[m] && joined_[m])
        return fail(std::string(OpName(a.op)) + " of " + who() +
                    " is not supported after rank " + std::to_string(m) +
                    " called join().");
  }
  if (a.op == Op::kBroadcast && !p.have[a.root])
    return fail("broadcast root rank " + std::to_string(a.root) +
                " did not submit " + who() + ".");
  if (a.op == Op::kAllgather) {
    for (int m : *members) resp.sizes.push_back(p.requests[m].shape[0]);
  } else if (a.op == Op::kAlltoall) {
    for (int m : *members) {
      const Request& b = p.requests[m];
      if (b.splits.size() != members->size())
        return fail("alltoall splits of " + who() + " on " + at(m) + " have " +
                    std::to_string(b.splits.size()) + " entries, expected " +
                    std::to_string(members->size()) + ".");
      for (int64_t s : b.splits) resp.sizes.push_back(s);
    }
  }
  return resp;
}

ResponseList Coordinator::TakeResponses(Clock::time_point now) {
  ResponseList list;
  TakeResponses(now, &list);
  return list;
}

void Coordinator::TakeResponses(Clock::time_point now, ResponseList* list) {
  list->shutdown = false;
  list->abort_reason.clear();
  list->small_allreduce_bytes = -1;
  list->stale_hits.clear();
  list->stale_hits.swap(stale_);
  std::vector<Response> errors;  // first in the list; rare
  FindDeadlock(now);             // operations may have completed since
  if (DeadlockDue(now)) FailDeadlocked(&errors);
  if (config_.stall_shutdown_s > 0)  // failed from the table
    MoveOlderThan(now, config_.stall_shutdown_s);
  // Ready entries in submission order; a group goes out only when complete.
  ready_.clear();
  std::map<std::string, int> group_ready;
  for (auto kv = table_.begin(); kv != table_.end(); ++kv) {
    Pending& p = kv->second;
    const Request* any = &First(p);
    if (p.complete) {
      ready_.push_back({p.order, kv, -1});
      if (any->group_size > 0)
        group_ready[TensorKey(any->process_set, any->group)]++;
      continue;
    }
    double waited = std::chrono::duration<double>(now - p.first_seen).count();
    if (config_.stall_shutdown_s > 0 && waited >= config_.stall_shutdown_s) {
      Response err = ResponseFor(*any);
      err.error = true;
      err.error_message =
          "Tensor '" + any->name + "' was not submitted by ranks " +
          RankList(Missing(p)) + " within " +
          ScaleString(config_.stall_shutdown_s) +
          " seconds (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS); failing it on "
          "every rank.";
      ready_.push_back({p.order, kv, -1});
      p.complete = true;
      p.stalled = true;
      errors.push_back(std::move(err));
    }
  }
  for (uint32_t s : lane_.open())
    if (lane_.IsComplete(s))
      ready_.push_back({lane_.at(s).order, table_.end(), static_cast<int>(s)});
  std::sort(ready_.begin(), ready_.end(),
            [](const Ready& a, const Ready& b) { return a.order < b.order; });
  fill_.Begin(&list->responses, config_.fusion_threshold);
  for (Response& e : errors) fill_.Add(std::move(e), -1);
  bool changes_cache = false;
  for (const Ready& o : ready_) {
    if (o.slot >= 0) {
      const uint32_t s = static_cast<uint32_t>(o.slot);
      fill_.AddCached(cache_->Get(s), s);
      lane_.Close(s);
      continue;
    }
    auto it = o.it;
    Pending& p = it->second;
    const Request* any = &First(p);
    if (p.stalled) {  // already reported above
      Erase(it);
      continue;
    }
    if (any->group_size > 0) {
      std::string g = TensorKey(any->process_set, any->group);
      if (group_ready[g] < any->group_size) continue;
    }
    Response resp = Validate(p);
    if (!resp.error && any->op == Op::kAddProcessSet) {
      resp.set_id = next_process_set_++;
      process_sets_[resp.set_id] =
          std::vector<int>(any->set_ranks.begin(), any->set_ranks.end());
    } else if (!resp.error && any->op == Op::kRemoveProcessSet) {
      if (any->set_id == 0 || process_sets_.count(any->set_id) == 0) {
        resp.error = true;
        resp.error_message = "process set " + std::to_string(any->set_id) +
                             " cannot be removed (not registered, or global)";
      } else {
        process_sets_.erase(any->set_id);
      }
    }
    int slot = -1;
    if (cache_ != nullptr && ResponseCache::Cacheable(resp)) {
      slot = cache_->FindTensor(resp, 0);
      changes_cache = changes_cache || slot < 0;
    }
    fill_.Add(std::move(resp), slot);
    Erase(it);
  }
  // Executing this list will change the cache: the slots still open must
  // not outlive the contents they were named against.
  if (changes_cache) MoveAllToTable();
  if (join_ready_) {
    Response j;
    j.op = Op::kJoin;
    j.names = {kJoinTensorName};
    j.shapes = {{}};
    j.last_joined = last_joined_;
    fill_.Add(std::move(j), -1);
    std::fill(joined_.begin(), joined_.end(), false);
    any_joined_ = false;
    join_ready_ = false;
  }
  fill_.Finish();
  if (!shutdown_ranks_.empty()) list->shutdown = true;
}

}  // namespace horovod
