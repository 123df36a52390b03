#include "coordination/response_cache.h"

#include <algorithm>

namespace horovod {
namespace {

// Everything but the name and shape that a cached response is reused for;
// `a` and `b` are Requests or Responses (same field names).
template <typename A, typename B>
bool SameScalars(const A& a, const B& b) {
  return a.op == b.op && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.root == b.root && a.device == b.device && a.prescale == b.prescale &&
         a.postscale == b.postscale;
}

// Cached entry `a` (one tensor) against tensor `i` of `b`.
bool SameParams(const Response& a, const Response& b, size_t i) {
  return SameScalars(a, b) && a.shapes.size() == 1 &&
         a.shapes[0] == b.shapes[i] && GroupOf(a, 0) == GroupOf(b, i);
}

// Tensor `i` of `r` as a response of its own.
void AssignSingle(const Response& r, size_t i, Response* out) {
  AssignParams(out, r);
  out->names.assign(1, r.names[i]);
  out->shapes.assign(1, r.shapes[i]);
  const TensorGroup g = GroupOf(r, i);
  out->groups.clear();
  if (g.size > 0) out->groups.push_back(g);
}

}  // namespace

bool ResponseCache::SameLookup(const Request& a, const Request& b) {
  return SameScalars(a, b) && a.shape == b.shape &&
         a.group_size == b.group_size && a.group == b.group &&
         a.refusal.empty() && b.refusal.empty();
}

bool ResponseCache::Cacheable(const Response& r) {
  return !r.error && (r.op == Op::kAllreduce || r.op == Op::kBroadcast ||
                      r.op == Op::kReducescatter);
}

int ResponseCache::SlotOf(int32_t process_set, const std::string& name) const {
  if (capacity_ == 0) return -1;
  auto it = index_.find(TensorKey(process_set, name, &key_));
  return it == index_.end() ? -1 : static_cast<int>(it->second);
}

int ResponseCache::Find(const Request& r) const {
  // A refusal must reach rank 0 whole: no slot stands for it.
  const int s = r.refusal.empty() ? SlotOf(r.process_set, r.name) : -1;
  if (s < 0) return -1;
  const Response& c = entries_[s];
  // A grouped tensor names its group by slot too: the cached entry keeps
  // the group, so rank 0 still releases the group whole.
  return SameScalars(c, r) && c.shapes[0] == r.shape &&
                 GroupOf(c, 0) == TensorGroup{r.group, r.group_size}
             ? s
             : -1;
}

void ResponseCache::Put(const Response& r, size_t i, uint64_t epoch) {
  if (capacity_ == 0) return;
  std::string key = TensorKey(r.process_set, r.names[i]);
  ++clock_;
  auto it = index_.find(key);
  uint32_t slot;
  if (it != index_.end()) {
    slot = it->second;
    Response& e = entries_[slot];
    if (!SameParams(e, r, i)) {
      AssignSingle(r, i, &e);
      changed_at_[slot] = epoch;
      ++version_;
    }
    last_use_[slot] = clock_;
    return;
  }
  if (entries_.size() < static_cast<size_t>(capacity_)) {
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
    last_use_.push_back(0);
    changed_at_.push_back(0);
  } else {
    slot = static_cast<uint32_t>(
        std::min_element(last_use_.begin(), last_use_.end()) -
        last_use_.begin());
    const Response& old = entries_[slot];
    index_.erase(TensorKey(old.process_set, old.names[0]));
  }
  AssignSingle(r, i, &entries_[slot]);
  changed_at_[slot] = epoch;
  ++version_;
  last_use_[slot] = clock_;
  index_[key] = slot;
}

int ResponseCache::FindTensor(const Response& r, size_t i) const {
  const int s = SlotOf(r.process_set, r.names[i]);
  return s >= 0 && SameParams(entries_[s], r, i) ? s : -1;
}

std::vector<uint32_t> ResponseCache::SlotsFor(const Response& r) const {
  std::vector<uint32_t> slots;
  if (!Cacheable(r)) return slots;
  slots.reserve(r.names.size());
  for (size_t i = 0; i < r.names.size(); ++i) {
    const int s = FindTensor(r, i);
    if (s < 0) return {};
    slots.push_back(static_cast<uint32_t>(s));
  }
  return slots;
}

bool ResponseCache::Refresh(uint32_t slot, const Response& r, size_t i) {
  if (!Has(slot)) return false;
  const Response& e = entries_[slot];
  if (e.process_set != r.process_set || e.names[0] != r.names[i] ||
      !SameParams(e, r, i))
    return false;
  // Exactly what Put does for an unchanged entry, so caches that took
  // either way stay identical.
  last_use_[slot] = ++clock_;
  return true;
}

Request ResponseCache::ToRequest(uint32_t slot, int rank) const {
  return RequestFor(entries_[slot], 0, rank);
}

}  // namespace horovod
