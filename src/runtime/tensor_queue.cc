#include "runtime/tensor_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace horovod {

TensorQueue::TensorQueue() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TensorQueue::~TensorQueue() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

Status TensorQueue::Add(TensorEntry* entries, size_t n) {
  if (n == 0) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_.ok()) return entries[0].Failure(closed_);
    // Files each entry as its key is checked; a duplicate (in flight, or
    // earlier in this batch) takes back what this call filed.
    added_.clear();
    for (size_t i = 0; i < n; ++i) {
      TensorEntry& e = entries[i];
      auto filed = in_flight_.try_emplace(e.request.Key());
      if (!filed.second) {
        for (auto it : added_) in_flight_.erase(it);
        return Status::InvalidArgument(
            "Duplicate tensor name '" + e.request.name + "' on rank " +
            std::to_string(e.request.rank) +
            ": an operation with this name is already in flight. Give each "
            "in-flight tensor a unique name.");
      }
      filed.first->second = std::move(e);
      added_.push_back(filed.first);
    }
    pending_.store(true, std::memory_order_relaxed);
    for (auto it : added_) {
      const TensorEntry& e = it->second;
      fresh_.push_back(e.request);
      fresh_operands_.push_back(e.tensor.input != nullptr ? e.tensor.input
                                                          : e.tensor.data);
    }
  }
  Wake();
  return Status::OK();
}

std::vector<std::string> TensorQueue::KeysOf(
    const std::vector<const HandleState*>& handles) {
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& kv : in_flight_)
      if (std::find(handles.begin(), handles.end(), kv.second.handle.get()) !=
          handles.end())
        keys.push_back(kv.first);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

void TensorQueue::TakeNew(std::vector<Request>* requests,
                          std::vector<const void*>* operands) {
  requests->clear();
  operands->clear();
  std::lock_guard<std::mutex> lock(mu_);
  requests->swap(fresh_);
  operands->swap(fresh_operands_);
}

bool TensorQueue::Take(const std::string& key, TensorEntry* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return false;
  *out = std::move(it->second);
  in_flight_.erase(it);
  pending_.store(!in_flight_.empty(), std::memory_order_relaxed);
  return true;
}

void TensorQueue::TakeMany(int process_set,
                           const std::vector<std::string>& names,
                           std::vector<TensorEntry>* out,
                           std::vector<bool>* present) {
  out->resize(names.size());
  present->assign(names.size(), false);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = in_flight_.find(TensorKey(process_set, names[i], &key_));
    if (it == in_flight_.end()) continue;
    (*out)[i] = std::move(it->second);
    (*present)[i] = true;
    in_flight_.erase(it);
  }
  pending_.store(!in_flight_.empty(), std::memory_order_relaxed);
}

bool TensorQueue::Pending() const {
  return pending_.load(std::memory_order_relaxed);
}

bool TensorQueue::Find(const std::string& key, Request* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return false;
  *out = it->second.request;
  return true;
}

void TensorQueue::FailAll(const Status& status) {
  std::unordered_map<std::string, TensorEntry> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_.ok()) closed_ = status;
    doomed.swap(in_flight_);
    pending_.store(false, std::memory_order_relaxed);
    fresh_.clear();
    fresh_operands_.clear();
  }
  for (auto& kv : doomed) kv.second.handle->Complete(kv.second.Failure(status));
}

void TensorQueue::Wake() {
  if (wake_hook_) return wake_hook_();
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

void TensorQueue::DrainWake() {
  uint64_t v;
  ssize_t ignored = read(wake_fd_, &v, sizeof(v));
  (void)ignored;
}

}  // namespace horovod
