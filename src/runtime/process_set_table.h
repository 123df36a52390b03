// ProcessSetTable: this rank's view of the registered process sets (id ->
// ascending global ranks). Set 0 is every rank. Changed only by the
// background loop as it executes add/remove responses; read by framework
// threads to validate calls. Thread-safe.
#ifndef HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_
#define HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_

#include <map>
#include <mutex>
#include <vector>

namespace horovod {

class ProcessSetTable {
 public:
  explicit ProcessSetTable(int size) {
    std::vector<int> all(size);
    for (int i = 0; i < size; ++i) all[i] = i;
    sets_[0] = all;
  }
  bool Get(int id, std::vector<int>* ranks) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sets_.find(id);
    if (it == sets_.end()) return false;
    *ranks = it->second;
    return true;
  }
  void Put(int id, std::vector<int> ranks) {
    std::lock_guard<std::mutex> lock(mu_);
    sets_[id] = std::move(ranks);
  }
  void Remove(int id) {
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
  mutable std::mutex mu_;
  std::map<int, std::vector<int>> sets_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_PROCESS_SET_TABLE_H_
