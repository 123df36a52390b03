// HandleState: the shared completion record behind a Handle. Written once by
// whichever thread drives the engine's loop (Complete), read by any number
// of waiting threads. Thread-safe.
#ifndef HOROVOD_RUNTIME_HANDLE_STATE_H_
#define HOROVOD_RUNTIME_HANDLE_STATE_H_

#include <horovod/engine.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "runtime/drive_gate.h"

namespace horovod {

struct HandleState {
  mutable std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // under mu, for cv's waiters
  // `done`, readable without the lock: a driving waiter checks it after
  // every loop step. Set (release) after everything Complete publishes.
  std::atomic<bool> finished{false};
  Status status;
  // Set by the background loop before Complete; read only after done.
  std::shared_ptr<Buffer> output;
  std::vector<int64_t> output_shape;
  std::vector<int64_t> received_splits;
  int int_result = -1;  // Handle::int_result()
  // The element type of the tensor this handle was enqueued with (outputs
  // have it too), so adapters need not remember it.
  DataType dtype = DataType::kUInt8;
  // Set at enqueue: the way back to the engine for waiting threads.
  std::shared_ptr<DriveGate> gate;

  bool Done() const { return finished.load(std::memory_order_acquire); }

  void Complete(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      status = std::move(s);
      done = true;
      finished.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_HANDLE_STATE_H_
