// Coordinator, deadlock detection: which ranks wait on operations that can
// never complete, and failing those operations on every rank.
#include <algorithm>
#include <set>

#include "coordination/coordinator.h"

namespace horovod {

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

void Coordinator::FailDeadlocked(std::vector<Response>* errors) {
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
      any_joined_ = false;
    } else {
      auto it = table_.find(key);
      if (it == table_.end()) continue;
      err = ResponseFor(First(it->second));
      Erase(it);
    }
    err.error = true;
    err.error_message = deadlock_message_;
    errors->push_back(std::move(err));
  }
  for (auto& w : waiting_) w.clear();  // until the ranks report anew
  waiting_ranks_ = 0;
}

}  // namespace horovod
