// Doorbell: a counter in (possibly shared) memory that one thread sleeps on
// and others ring, so a sleeper costs no CPU and a ringer pays a syscall
// only when somebody actually sleeps. Futex-based; works across processes
// when the Doorbell lives in a shared mapping. Thread-safe.
#ifndef HOROVOD_TRANSPORT_DOORBELL_H_
#define HOROVOD_TRANSPORT_DOORBELL_H_

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace horovod {

// Futex on a 32-bit word in any mapping (not process-private). Returns what
// the syscall does; `timeout_ms` < 0 waits without limit.
long FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms);
void FutexWakeAll(std::atomic<uint32_t>* word);
void CpuRelax();

// Busy-polls `done` for up to `spin_us` microseconds, yielding the core
// every few microseconds; true once it holds. The window starts after a
// first kQuickPolls polls, which read no clock: a hand-off between ranks
// with a core each lands within them (under a microsecond here), where two
// clock reads would cost a tenth of the wait. `*window_start` (when given)
// is set to when the window started, and left as it is when `done` held
// before (or spinning is off).
inline constexpr int kQuickPolls = 64;
template <typename Pred>
bool SpinUntil(Pred done, double spin_us,
               std::chrono::steady_clock::time_point* window_start = nullptr) {
  if (done()) return true;
  if (spin_us <= 0) return false;
  for (int i = 0; i < kQuickPolls; ++i) {
    CpuRelax();
    if (done()) return true;
  }
  using SteadyClock = std::chrono::steady_clock;
  const auto start = SteadyClock::now();
  if (window_start != nullptr) *window_start = start;
  const auto until =
      start + std::chrono::nanoseconds(static_cast<int64_t>(spin_us * 1000));
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63) {
      if (SteadyClock::now() >= until) return done();
      // The thread we wait for may be queued behind us on this very core.
      sched_yield();
    }
  }
}

// How long to busy-poll before sleeping, learned from how recent waits
// ended. Spinning pays only while the awaited event usually comes within
// the window: ranks with a core each, trading small messages. When waits run
// longer (a framework thread computing on the core, a peer that is busy),
// every spin is CPU taken from that work, so it stops spinning until short
// waits come back; waits that sleep are measured too, so it notices. Used by
// one thread.
class AdaptiveSpin {
 public:
  explicit AdaptiveSpin(double window_us = 0) : window_us_(window_us) {}
  // The spin for the next wait: the whole window or nothing.
  double spin_us() const { return short_share_ >= 0.5 ? window_us_ : 0; }
  // The wait that began at `start` has just ended (spinning and sleeping).
  void RecordSince(std::chrono::steady_clock::time_point start) {
    Record(std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - start)
               .count());
  }
  // The wait that just ended took `waited_us`. A wait that slept pays the
  // wake-up on top of the event's own delay, so "short" reaches past the
  // window: otherwise waits that are long only because nobody spins (every
  // hand-off a futex wake-up) would keep it from ever spinning again.
  void Record(double waited_us) {
    const double is_short = waited_us <= kShortFactor * window_us_ ? 1.0 : 0.0;
    short_share_ += (is_short - short_share_) / 16;
  }

 private:
  static constexpr double kShortFactor = 4;
  double window_us_;
  double short_share_ = 1.0;  // moving share of short waits
};

struct Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t Read() const { return seq.load(std::memory_order_acquire); }
  void Ring();
  // Returns once seq differs from `seen` (true) or after about `timeout_ms`
  // (false). Busy-polls for `spin_us` first. `*quick` (when given) tells
  // whether the ring came within SpinUntil's first polls, untimed.
  bool Wait(uint32_t seen, double spin_us, int timeout_ms,
            bool* quick = nullptr);
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_DOORBELL_H_
