// FutexLock: a mutual-exclusion lock for short critical sections whose
// uncontended lock and unlock are one atomic instruction each, inline. The
// queue's lock is taken once per submitted tensor, where a pthread mutex's
// calls, type checks and owner bookkeeping cost more than the section they
// guard. A contended lock sleeps on a futex (it never spins), as a pthread
// mutex does. Not recursive; BasicLockable, for std::lock_guard.
// Thread-safe.
#ifndef HOROVOD_RUNTIME_FUTEX_LOCK_H_
#define HOROVOD_RUNTIME_FUTEX_LOCK_H_

#include <atomic>
#include <cstdint>

namespace horovod {

class FutexLock {
 public:
  FutexLock() = default;
  FutexLock(const FutexLock&) = delete;
  FutexLock& operator=(const FutexLock&) = delete;

  void lock() {
    uint32_t free = kFree;
    if (!word_.compare_exchange_strong(free, kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      LockContended();
  }
  void unlock() {
    if (word_.exchange(kFree, std::memory_order_release) == kWaited) Wake();
  }

 private:
  // kWaited: held, and someone may sleep on it, so unlock wakes sleepers.
  static constexpr uint32_t kFree = 0, kHeld = 1, kWaited = 2;
  // The longest one sleep lasts before the word is tried again.
  static constexpr int kSleepBoundMs = 1000;
  void LockContended();
  void Wake();
  std::atomic<uint32_t> word_{kFree};
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_FUTEX_LOCK_H_
