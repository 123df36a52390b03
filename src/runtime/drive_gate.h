// DriveGate: the way from a thread waiting on a Handle to the engine that
// will complete it, so the waiter can run the engine's loop itself instead
// of sleeping while the loop thread does the work and then wakes it. For a
// synchronous collective that removes two thread switches, which on a busy
// machine cost more than the collective; and oversubscribed ranks keep one
// runnable thread each instead of two.
//
// Shared (shared_ptr) by the engine and every handle it issued, so a handle
// may outlive its engine: Close() cuts the link and waits for the drivers
// still inside. Thread-safe.
#ifndef HOROVOD_RUNTIME_DRIVE_GATE_H_
#define HOROVOD_RUNTIME_DRIVE_GATE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace horovod {

struct HandleState;

class DriveGate {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Runs the loop until `h` is done, `until` passes or the loop has ended.
  using DriveFn = std::function<void(HandleState& h, TimePoint until)>;

  explicit DriveGate(DriveFn fn) : fn_(std::move(fn)) {}

  // False, without running anything, once closed.
  bool Drive(HandleState& h, TimePoint until) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return false;
      ++inside_;
    }
    fn_(h, until);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --inside_;
    }
    cv_.notify_all();
    return true;
  }

  // After this returns no DriveFn runs, now or later.
  void Close() {
    std::unique_lock<std::mutex> lock(mu_);
    closed_ = true;
    cv_.wait(lock, [&] { return inside_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int inside_ = 0;
  DriveFn fn_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_DRIVE_GATE_H_
