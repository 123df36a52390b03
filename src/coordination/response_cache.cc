#include "coordination/response_cache.h"

namespace horovod {
namespace {

std::string KeyOf(int32_t process_set, const std::string& name) {
  return std::to_string(process_set) + ":" + name;
}

// Everything but the name that a cached response is reused for.
bool SameParams(const Response& a, const Response& b) {
  return a.op == b.op && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.root == b.root && a.device == b.device && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.shapes == b.shapes;
}

}  // namespace

bool ResponseCache::Cacheable(const Response& r) {
  return !r.error && (r.op == static_cast<uint8_t>(OpType::kAllreduce) ||
                      r.op == static_cast<uint8_t>(OpType::kBroadcast) ||
                      r.op == static_cast<uint8_t>(OpType::kReducescatter));
}

int ResponseCache::Find(const Request& r) const {
  if (capacity_ == 0 || r.group_size > 0) return -1;
  auto it = index_.find(KeyOf(r.process_set, r.name));
  if (it == index_.end()) return -1;
  return SameParams(entries_[it->second].response, ResponseFor(r))
             ? static_cast<int>(it->second)
             : -1;
}

void ResponseCache::Put(const Response& single, uint64_t epoch) {
  if (capacity_ == 0) return;
  std::string key = KeyOf(single.process_set, single.names[0]);
  ++clock_;
  auto it = index_.find(key);
  uint32_t slot;
  if (it != index_.end()) {
    slot = it->second;
    Entry& e = entries_[slot];
    bool same = SameParams(e.response, single);
    if (!same) {
      e.response = single;
      e.changed_at = epoch;
    }
    e.last_use = clock_;
    return;
  }
  if (entries_.size() < static_cast<size_t>(capacity_)) {
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  } else {
    slot = 0;
    for (uint32_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].last_use < entries_[slot].last_use) slot = i;
    Entry& old = entries_[slot];
    index_.erase(KeyOf(old.response.process_set, old.response.names[0]));
  }
  Entry& e = entries_[slot];
  e.used = true;
  e.response = single;
  e.changed_at = epoch;
  e.last_use = clock_;
  index_[key] = slot;
}

Request ResponseCache::ToRequest(uint32_t slot, int rank) const {
  return RequestFor(entries_[slot].response, 0, rank);
}

}  // namespace horovod
