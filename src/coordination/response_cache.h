// ResponseCache: remembers the parameters of recently executed tensors so
// that in steady state a rank names a tensor by a slot number (a bit) and
// the coordinator answers with slot numbers too.
//
// Every rank holds an identical copy: the cache changes only while a
// response list is executed, the same lists in the same order on every rank,
// through Put, so slots agree everywhere without extra messages. Each slot
// remembers the epoch (response lists executed) at which its content last
// changed, which lets the coordinator detect a hit sent against an older
// content. Used only by the thread driving the engine's loop.
#ifndef HOROVOD_COORDINATION_RESPONSE_CACHE_H_
#define HOROVOD_COORDINATION_RESPONSE_CACHE_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordination/message.h"

namespace horovod {

class ResponseCache {
 public:
  explicit ResponseCache(int capacity) : capacity_(capacity) {}

  int capacity() const { return capacity_; }
  // The slot holding exactly this request's parameters, or -1.
  int Find(const Request& r) const;
  bool Has(uint32_t slot) const { return slot < entries_.size(); }
  // A single-tensor response describing the cached entry.
  const Response& Get(uint32_t slot) const { return entries_[slot]; }
  uint64_t ChangedAt(uint32_t slot) const { return changed_at_[slot]; }
  // Tensor `i` of an executed OK response (fused or not); inserts,
  // refreshes or replaces (LRU when full).
  void Put(const Response& r, size_t i, uint64_t epoch);
  // The slot holding tensor `i` of `r` with exactly its parameters, or -1.
  int FindTensor(const Response& r, size_t i) const;
  // The slots of every tensor of `r` when all are cached as they are (so
  // the response can travel as slot numbers); else empty.
  std::vector<uint32_t> SlotsFor(const Response& r) const;
  // Put for tensor `i` of `r` when `slot` already holds it unchanged: only
  // marks the use, with no key to build or look up. False (nothing done)
  // when the slot holds something else; then Put.
  bool Refresh(uint32_t slot, const Response& r, size_t i);
  // Refresh for a slot whose entry the caller took from this cache (Get)
  // and that nothing replaced since: nothing to compare.
  void Touch(uint32_t slot) { last_use_[slot] = ++clock_; }
  // Counts changes of content (an entry inserted, replaced or changed):
  // what was read from the cache while it stayed the same still holds.
  uint64_t version() const { return version_; }
  // Reconstructs the request a hit on `slot` stands for.
  Request ToRequest(uint32_t slot, int rank) const;
  static bool Cacheable(const Response& r);
  // Whether Find compares requests `a` and `b` (of one key) alike: then
  // the slot found for one stands for the other while it is unchanged.
  static bool SameLookup(const Request& a, const Request& b);
  size_t size() const { return index_.size(); }
  // The slot cached under this key, whatever its parameters, or -1.
  int SlotOf(int32_t process_set, const std::string& name) const;

 private:
  int capacity_;
  uint64_t clock_ = 0;
  uint64_t version_ = 0;
  std::vector<Response> entries_;  // single-tensor responses, by slot
  // Each entry's last use and the epoch its content last changed at, by
  // slot, apart from the entries: a steady round reads and touches every
  // slot it runs, and these stay a few cache lines.
  std::vector<uint64_t> last_use_;
  std::vector<uint64_t> changed_at_;
  std::unordered_map<std::string, uint32_t> index_;
  mutable std::string key_;  // SlotOf's lookups, reused
};

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_RESPONSE_CACHE_H_
