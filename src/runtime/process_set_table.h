// ProcessSetTable: this rank's view of the registered process sets (id ->
// ascending global ranks). Set 0 is every rank. Changed only by the
// background loop as it executes add/remove responses; read by framework
// threads to validate calls. Thread-safe.
#ifndef HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_
#define HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace horovod {

class ProcessSetTable {
 public:
  explicit ProcessSetTable(int size) {
    std::vector<int> all(size);
    for (int i = 0; i < size; ++i) all[i] = i;
    global_ = std::make_shared<const std::vector<int>>(std::move(all));
    sets_[0] = global_;
  }
  // Set 0, which is never removed (rank 0 refuses to): read without the
  // lock on the enqueue path.
  const std::vector<int>& global() const { return *global_; }
  bool Get(int id, std::vector<int>* ranks) const {
    auto found = Find(id);
    if (found == nullptr) return false;
    *ranks = *found;
    return true;
  }
  // The members without copying them (the enqueue path); null if unknown.
  std::shared_ptr<const std::vector<int>> Find(int id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sets_.find(id);
    return it == sets_.end() ? nullptr : it->second;
  }
  void Put(int id, std::vector<int> ranks) {
    std::lock_guard<std::mutex> lock(mu_);
    sets_[id] = std::make_shared<const std::vector<int>>(std::move(ranks));
  }
  void Remove(int id) {
    if (id == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    sets_.erase(id);
  }
  std::vector<int> Ids() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> ids;
    for (auto& kv : sets_) ids.push_back(kv.first);
    return ids;
  }

 private:
  std::shared_ptr<const std::vector<int>> global_;
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<const std::vector<int>>> sets_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_
