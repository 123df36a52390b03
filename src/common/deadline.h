// Deadline: an absolute point on the monotonic clock. Every blocking wait in
// the engine takes one, so no wait is unbounded. Plain value type.
#ifndef HOROVOD_COMMON_DEADLINE_H_
#define HOROVOD_COMMON_DEADLINE_H_

#include <chrono>

namespace horovod {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline After(double seconds) {
    Deadline d;
    d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds));
    return d;
  }
  bool Expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, max_ms], for poll(2).
  int RemainingMs(int max_ms = 1 << 30) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    at_ - Clock::now())
                    .count();
    if (left < 0) return 0;
    return left > max_ms ? max_ms : static_cast<int>(left);
  }
  Clock::time_point at() const { return at_; }

 private:
  Clock::time_point at_;
};

}  // namespace horovod

#endif  // HOROVOD_COMMON_DEADLINE_H_
