// DriveGate: the way from a thread waiting on a Handle to the engine that
// will complete it, so the waiter can run the engine's loop itself instead
// of sleeping while the loop thread does the work and then wakes it. For a
// synchronous collective that removes two thread switches, which on a busy
// machine cost more than the collective; and oversubscribed ranks keep one
// runnable thread each instead of two.
//
// It also tells the engine which operations threads are blocked waiting on
// (Waiting), so rank 0 can tell ranks that can never meet from slow ones.
//
// Shared (shared_ptr) by the engine and every handle it issued, so a handle
// may outlive its engine: Close() cuts the link and waits for the callers
// still inside. Thread-safe.
#ifndef HOROVOD_RUNTIME_DRIVE_GATE_H_
#define HOROVOD_RUNTIME_DRIVE_GATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/tick_clock.h"

namespace horovod {

struct HandleState;

class DriveGate {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Runs the loop until `h` is done, `until` passes or the loop has ended.
  // It reads the clock only when something needs the time (`until` when
  // it is not TimePoint::max()): a reading costs about 30 ns here, a
  // synchronous collective well under 1 µs.
  using DriveFn = std::function<void(HandleState& h, TimePoint until)>;
  // A thread begins (true) or ends (false) waiting on `h`, at `now`.
  using WaitFn =
      std::function<void(const HandleState& h, bool begin, TimePoint now)>;

  // An empty `drive` leaves the loop to the engine's thread (waiters sleep).
  DriveGate(DriveFn drive, WaitFn on_wait)
      : fn_(std::move(drive)), on_wait_(std::move(on_wait)) {}

  // False, without running anything, once closed or when waiters do not
  // drive.
  bool Drive(HandleState& h, TimePoint until) {
    if (!fn_ || !Enter()) return false;
    fn_(h, until);
    Leave();
    return true;
  }

  // Twice per synchronous collective, so without locks: an atomic count
  // of callers inside and a closed flag, which Close sets before it waits
  // for the count to drop to zero (both sequentially consistent, so either
  // the caller sees the flag or Close sees the caller).
  void Waiting(const HandleState& h, bool begin, TimePoint now) {
    if (!on_wait_) return;
    waiting_inside_.fetch_add(1);
    if (!shut_.load()) on_wait_(h, begin, now);
    waiting_inside_.fetch_sub(1);
  }

  // Time threads spent blocked in Handle::Wait (EngineMetrics::wait_s),
  // timed by ticks(): a wait adds ticks().Since() its start.
  const TickClock& ticks() const { return ticks_; }
  void AddWaitTicks(uint64_t t) {
    wait_ticks_.fetch_add(t, std::memory_order_relaxed);
  }
  std::chrono::nanoseconds wait_time() const {
    return ticks_.ToDuration(wait_ticks_.load(std::memory_order_relaxed));
  }

  // After this returns no DriveFn or WaitFn runs, now or later.
  void Close() {
    shut_.store(true);
    {
      // A driver that leaves last after shut_ is set notifies under mu_,
      // so it cannot slip between this check and the wait.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return inside_.load() == 0; });
    }
    while (waiting_inside_.load() != 0) std::this_thread::yield();
  }

 private:
  // Once per wait that drives, so without locks either, as Waiting: the
  // count goes up before the flag is read, and Close sets the flag before
  // it reads the count.
  bool Enter() {
    inside_.fetch_add(1);
    if (!shut_.load()) return true;
    Leave();
    return false;
  }
  void Leave() {
    if (inside_.fetch_sub(1) == 1 && shut_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }

  const TickClock ticks_;
  std::atomic<uint64_t> wait_ticks_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> inside_{0};
  DriveFn fn_;
  WaitFn on_wait_;
  std::atomic<bool> shut_{false};
  std::atomic<int> waiting_inside_{0};
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_DRIVE_GATE_H_
