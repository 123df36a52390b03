#include "coordination/coordinator.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace horovod {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

std::string Fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

const Request& Coordinator::First(const Pending& p) {
  for (size_t i = 0; i < p.have.size(); ++i)
    if (p.have[i]) return p.requests[i];
  return p.requests[0];
}

Coordinator::Coordinator(const CoordinatorConfig& config,
                         const ResponseCache* cache)
    : config_(config),
      cache_(cache),
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
    AddRequest(cache_->ToRequest(slot, rank), now);
  }
  if (list.shutdown) shutdown_ranks_.insert(rank);
  if (list.waiting_update) waiting_[rank] = list.waiting;
  RefreshCompleteness(now);
  FindDeadlock(now);
}

bool Coordinator::WaitsFor(int r, const std::string& key,
                           std::vector<int>* missing) const {
  missing->clear();
  if (key == TensorKey(0, kJoinTensorName)) {
    // Join ends when every rank has joined.
    if (!joined_[r] || join_ready_) return false;
    for (int m = 0; m < config_.size; ++m)
      if (!joined_[m]) missing->push_back(m);
    return !missing->empty();
  }
  auto it = table_.find(key);
  if (it == table_.end()) return false;
  const Pending& p = it->second;
  if (p.complete || !p.have[r]) return false;
  const std::vector<int>* members = Members(First(p).process_set);
  if (members == nullptr) return false;
  for (int m : *members)
    if (!Present(p, m)) missing->push_back(m);
  return !missing->empty();
}

// A rank is stuck when every operation its threads wait on waits for some
// stuck rank: the greatest set closed under that rule is found by starting
// from every waiting rank and dropping ranks with a way out until none is
// left to drop. Ranks that still compute, or wait on something that can
// complete, are never in it; so a slow rank is never mistaken for a
// deadlocked one. The same set must persist for deadlock_grace_s before it
// is failed: a thread a rank has just started, and the engine does not know
// of yet, may be about to submit what the others wait for.
void Coordinator::FindDeadlock(Clock::time_point now) {
  // The common case, every list: nobody reported a wait, nothing to undo.
  if (deadlocked_.empty() &&
      std::all_of(waiting_.begin(), waiting_.end(),
                  [](const std::vector<std::string>& w) { return w.empty(); }))
    return;
  const int n = config_.size;
  std::vector<bool> stuck(n, false);
  std::vector<int> missing;
  int candidates = 0;
  for (int r = 0; r < n; ++r) {
    if (waiting_[r].empty()) continue;
    bool all = true;
    for (const std::string& key : waiting_[r])
      all = all && WaitsFor(r, key, &missing);
    stuck[r] = all;
    candidates += all ? 1 : 0;
  }
  for (bool changed = candidates >= 2; changed;) {  // one rank cannot
    changed = false;                                // deadlock alone
    for (int r = 0; r < n; ++r) {
      if (!stuck[r]) continue;
      for (const std::string& key : waiting_[r]) {
        WaitsFor(r, key, &missing);
        bool blocked = std::any_of(missing.begin(), missing.end(),
                                   [&](int m) { return stuck[m]; });
        if (!blocked) {
          stuck[r] = false;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<int> ranks;
  std::vector<std::string> keys;
  for (int r = 0; r < n && candidates >= 2; ++r) {
    if (!stuck[r]) continue;
    ranks.push_back(r);
    keys.insert(keys.end(), waiting_[r].begin(), waiting_[r].end());
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys == deadlocked_) return;  // unchanged: the clock keeps running
  deadlocked_ = std::move(keys);
  deadlock_since_ = now;
  if (ranks.empty()) return;
  std::string what;
  for (int r : ranks) what += (what.empty() ? "" : "; ") + DescribeWait(r);
  deadlock_message_ =
      "Ranks " + RankList(ranks) +
      " are blocked in operations that can never match: " + what +
      ". Failing them on every rank.";
}

bool Coordinator::DeadlockDue(Clock::time_point now) const {
  return !deadlocked_.empty() &&
         std::chrono::duration<double>(now - deadlock_since_).count() >=
             config_.deadlock_grace_s;
}

std::string Coordinator::DescribeWait(int r) const {
  std::string out = "rank " + std::to_string(r) + " waits in ";
  bool first = true;
  for (const std::string& key : waiting_[r]) {
    if (!first) out += " and ";
    first = false;
    if (key == TensorKey(0, kJoinTensorName)) {
      out += "join";
      continue;
    }
    auto it = table_.find(key);
    if (it == table_.end()) continue;
    const Request& q = First(it->second);
    out += OpName(q.op);
    if (q.op == Op::kAddProcessSet) {
      out += " of ranks " + ShapeString(std::vector<int64_t>(
                                q.set_ranks.begin(), q.set_ranks.end()));
    } else if (q.op == Op::kRemoveProcessSet) {
      out += " of process set " + std::to_string(q.set_id);
    } else {
      if (q.op != Op::kBarrier) out += " '" + q.name + "'";
      if (q.process_set != 0)
        out += " on process set " + std::to_string(q.process_set);
    }
  }
  return out;
}

void Coordinator::FailDeadlocked(ResponseList* list) {
  std::vector<std::string> keys;
  keys.swap(deadlocked_);
  // A group fails whole: its other members would wait for it forever.
  std::set<std::string> groups;
  for (const std::string& key : keys) {
    auto it = table_.find(key);
    if (it == table_.end()) continue;
    const Request& q = First(it->second);
    if (q.group_size > 0) groups.insert(TensorKey(q.process_set, q.group));
  }
  for (const auto& kv : table_) {
    const Request& q = First(kv.second);
    if (q.group_size > 0 && groups.count(TensorKey(q.process_set, q.group)) &&
        std::find(keys.begin(), keys.end(), kv.first) == keys.end())
      keys.push_back(kv.first);
  }
  for (const std::string& key : keys) {
    Response err;
    if (key == TensorKey(0, kJoinTensorName)) {
      err.op = Op::kJoin;
      err.names = {kJoinTensorName};
      err.shapes = {{}};
      std::fill(joined_.begin(), joined_.end(), false);
    } else {
      auto it = table_.find(key);
      if (it == table_.end()) continue;
      err = ResponseFor(First(it->second));
      table_.erase(it);
    }
    err.error = true;
    err.error_message = deadlock_message_;
    list->responses.push_back(std::move(err));
  }
  for (auto& w : waiting_) w.clear();  // until the ranks report anew
}

void Coordinator::AddRequest(Request r, Clock::time_point now) {
  if (r.op == Op::kJoin) {
    joined_[r.rank] = true;
    last_joined_ = r.rank;
    join_ready_ =
        std::all_of(joined_.begin(), joined_.end(), [](bool b) { return b; });
    return;
  }
  Pending& p = table_[r.Key()];
  if (p.have.empty()) {
    p.have.assign(config_.size, false);
    p.requests.resize(config_.size);
    p.first_seen = now;
    p.order = next_order_++;
  }
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
  bool any_incomplete = false;
  bool any_complete = false;
  int64_t ready_bytes = 0;
  Clock::time_point oldest = Clock::time_point::max();
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

Clock::time_point Coordinator::NextWake(Clock::time_point now) const {
  Clock::time_point wake = Clock::time_point::max();
  auto after = [](Clock::time_point t, double s) {
    return t + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(s));
  };
  if (!deadlocked_.empty())
    wake = std::min(wake, after(deadlock_since_, config_.deadlock_grace_s));
  for (const auto& kv : table_) {
    const Pending& p = kv.second;
    if (p.complete) {
      wake = std::min(wake, after(p.complete_at, config_.cycle_time_s));
      continue;
    }
    if (config_.stall_check && !p.warned)
      wake = std::min(wake, after(p.first_seen, config_.stall_check_s));
    if (config_.stall_shutdown_s > 0)
      wake = std::min(wake, after(p.first_seen, config_.stall_shutdown_s));
  }
  return std::max(wake, now);
}

std::vector<std::string> Coordinator::TakeStallWarnings(Clock::time_point now) {
  std::vector<std::string> out;
  if (!config_.stall_check) return out;
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
        Fmt(config_.stall_check_s) + " seconds. Tensor '" + any->name + "' (" +
        OpName(any->op) + ") is ready on ranks " + RankList(ready) +
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
                  at(first) + " has (" + Fmt(a.prescale) + ", " +
                  Fmt(a.postscale) + "), " + at(r) + " has (" +
                  Fmt(b.prescale) + ", " + Fmt(b.postscale) + ").");
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

void Coordinator::Fuse(std::vector<Response>* responses) const {
  if (config_.fusion_threshold <= 0) return;
  std::vector<Response> out;
  std::vector<int64_t> bytes;
  for (Response& r : *responses) {
    const int64_t n = TensorBytes(r.dtype, r.shapes[0]);
    const int t = FusionTarget(out, bytes, r, n, config_.fusion_threshold);
    if (t >= 0) {
      AddTensor(&out[t], std::move(r), 0);
      bytes[t] += n;
    } else {
      out.push_back(std::move(r));
      bytes.push_back(n);
    }
  }
  *responses = std::move(out);
}

ResponseList Coordinator::TakeResponses(Clock::time_point now) {
  ResponseList list;
  list.stale_hits.swap(stale_);
  FindDeadlock(now);  // operations may have completed since
  if (DeadlockDue(now)) FailDeadlocked(&list);
  // Ready entries in submission order; a group goes out only when complete.
  std::vector<std::pair<uint64_t, Table::iterator>> ready;
  std::map<std::string, int> group_ready;
  for (auto kv = table_.begin(); kv != table_.end(); ++kv) {
    Pending& p = kv->second;
    const Request* any = &First(p);
    if (p.complete) {
      ready.emplace_back(p.order, kv);
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
          RankList(Missing(p)) + " within " + Fmt(config_.stall_shutdown_s) +
          " seconds (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS); failing it on "
          "every rank.";
      ready.emplace_back(p.order, kv);
      p.complete = true;
      p.stalled = true;
      list.responses.push_back(err);
    }
  }
  std::sort(ready.begin(), ready.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Response> responses;
  responses.reserve(ready.size());
  for (auto& o : ready) {
    auto it = o.second;
    Pending& p = it->second;
    const Request* any = &First(p);
    if (p.stalled) {  // already reported above
      table_.erase(it);
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
    responses.push_back(std::move(resp));
    table_.erase(it);
  }
  Fuse(&responses);
  for (auto& r : responses) list.responses.push_back(std::move(r));
  if (join_ready_) {
    Response j;
    j.op = Op::kJoin;
    j.names = {kJoinTensorName};
    j.shapes = {{}};
    j.last_joined = last_joined_;
    list.responses.push_back(j);
    std::fill(joined_.begin(), joined_.end(), false);
    join_ready_ = false;
  }
  if (!shutdown_ranks_.empty()) list.shutdown = true;
  return list;
}

}  // namespace horovod
