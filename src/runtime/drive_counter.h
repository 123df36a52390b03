// DriveCounter: a statistic that only the thread driving the engine's loop
// (holding the drive mutex) adds to, and any thread may read. The drive
// mutex orders successive writers, so an add is a plain load and store,
// not a locked read-modify-write (which stalls the pipeline) on every
// collective. Thread-safety: Add under the drive mutex; Get anywhere.
#ifndef HOROVOD_RUNTIME_DRIVE_COUNTER_H_
#define HOROVOD_RUNTIME_DRIVE_COUNTER_H_

#include <atomic>

namespace horovod {

template <typename T>
class DriveCounter {
 public:
  void Add(T v) {
    value_.store(value_.load(std::memory_order_relaxed) + v,
                 std::memory_order_relaxed);
  }
  T Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<T> value_{0};
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_DRIVE_COUNTER_H_
