// TensorQueue: where framework threads hand collectives to the engine's
// loop. Holds every in-flight entry by key (process set + name), so a
// duplicate name is refused at once, and the list of entries not yet told to
// the coordinator. Enqueue wakes the loop through an eventfd (or the wake
// hook: the shared-memory doorbell), so the loop sleeps instead of spinning.
// Thread-safe.
#ifndef HOROVOD_RUNTIME_TENSOR_QUEUE_H_
#define HOROVOD_RUNTIME_TENSOR_QUEUE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordination/message.h"
#include "runtime/handle_state.h"

namespace horovod {

struct TensorEntry {
  Request request;
  // Where the data lies; its shape is left empty (request.shape has it).
  TensorView tensor;
  std::shared_ptr<HandleState> handle;

  int64_t NumBytes() const { return TensorBytes(request.dtype, request.shape); }

  // The job failed under this entry: the error names the operation and the
  // tensor, so every rank's last line says which one was lost.
  Status Failure(const Status& why) const {
    const char* op =
        request.op <= Op::kJoin ? OpName(request.op) : "process set change";
    return Status(why.code(), std::string(op) + " '" + request.name +
                                  "' failed: " + why.message());
  }
};

class TensorQueue {
 public:
  TensorQueue();
  ~TensorQueue();

  // Takes entries[0, n); all-or-nothing: refuses every entry if any key is
  // already in flight.
  Status Add(TensorEntry* entries, size_t n);
  // Requests not yet sent to the coordinator, in enqueue order, and where
  // each one's input lies (TensorView::input, else data; null for control
  // requests). Swaps with the vectors passed in, which the next Adds fill
  // (so their capacity is reused instead of regrown every step).
  void TakeNew(std::vector<Request>* requests,
               std::vector<const void*>* operands);
  // Removes and returns the entry, or false if this rank has none.
  bool Take(const std::string& key, TensorEntry* out);
  // Take for each of `names` in `process_set`, under one lock:
  // (*present)[i] says whether (*out)[i] was found.
  void TakeMany(int process_set, const std::vector<std::string>& names,
                std::vector<TensorEntry>* out, std::vector<bool>* present);
  // Whether some entry is in flight (submitted and not yet executed): a
  // hint read without the lock, once a loop step, to tell waiting for work
  // from waiting on peers.
  bool Pending() const;
  // Copies the in-flight request under `key`; false if there is none.
  bool Find(const std::string& key, Request* out);
  // The keys of the in-flight entries behind `handles`, sorted, each once;
  // handles whose entry has left the queue (executing or done) are
  // skipped. Scans every entry: for rare reports, not the data path.
  std::vector<std::string> KeysOf(
      const std::vector<const HandleState*>& handles);
  // Fails every in-flight entry; later Adds are refused with `status`.
  void FailAll(const Status& status);
  int wake_fd() const { return wake_fd_; }
  // Replaces the eventfd as the way Wake reaches the loop. Set before the
  // loop starts.
  void SetWakeHook(std::function<void()> hook) { wake_hook_ = std::move(hook); }
  void Wake();
  void DrainWake();

 private:
  std::mutex mu_;
  using Entries = std::unordered_map<std::string, TensorEntry>;
  Entries in_flight_;
  std::vector<Entries::iterator> added_;  // by the running Add
  std::string key_;                       // TakeMany's lookups, reused
  std::vector<Request> fresh_;
  std::vector<const void*> fresh_operands_;
  std::atomic<bool> pending_{false};  // !in_flight_.empty(), set under mu_
  Status closed_;
  int wake_fd_;
  std::function<void()> wake_hook_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_TENSOR_QUEUE_H_
