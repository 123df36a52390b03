// Doorbell: counters in (possibly shared) memory that one thread waits on
// and others ring, so a sleeper costs no CPU and a ringer pays a syscall
// only when somebody actually sleeps; a ringer whose news the waiter can
// check for itself rings only a sleeper. Futex-based; works across
// processes when the Doorbell lives in a shared mapping. Thread-safe.
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
// Polls `done` once and then up to kQuickPolls more times, reading no
// clock; true once it holds.
template <typename Pred>
bool PollBriefly(Pred done) {
  if (done()) return true;
  for (int i = 0; i < kQuickPolls; ++i) {
    CpuRelax();
    if (done()) return true;
  }
  return false;
}
template <typename Pred>
bool SpinUntil(Pred done, double spin_us,
               std::chrono::steady_clock::time_point* window_start = nullptr) {
  if (spin_us <= 0) return done();
  if (PollBriefly(done)) return true;
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

// Three counters, each on a cache line of its own. `seq` is what a waiter
// sleeps on and other processes ring; the owner's own threads ring `local`
// instead, so an enqueue does not take from a peer the line that peer has
// just rung (each such ring was an ownership transfer on the data path);
// `sleepers` changes only when somebody sleeps, so ringers read it from
// their own cache.
struct Doorbell {
  // What a waiter has seen of both counters.
  struct Seen {
    uint32_t seq = 0;
    uint32_t local = 0;
  };

  alignas(64) std::atomic<uint32_t> seq{0};
  alignas(64) std::atomic<uint32_t> local{0};
  alignas(64) std::atomic<uint32_t> sleepers{0};

  Seen Read() const {
    return {seq.load(std::memory_order_acquire),
            local.load(std::memory_order_acquire)};
  }
  // Rung from another process (a control frame, room in a ring).
  void Ring();
  // Rung by a thread of the process that waits on this bell.
  void RingLocal();
  // For a ringer that has just published state the waiter's `also`
  // predicate (below) checks: a spinning waiter sees that state itself, so
  // only a sleeping one needs the ring, and the ringer leaves the line the
  // waiter spins on alone. The state must be stored, and read by `also`,
  // with memory_order_seq_cst: that is what orders the store before the
  // look for sleepers, against a sleeper's count before its last check.
  void WakeSleepers();

  // Returns once either counter differs from `seen` or `also()` holds
  // (true), or after about `timeout_ms` (false). Busy-polls for `spin_us`
  // first. `*quick` (when given) tells whether the ring came within
  // SpinUntil's first polls, untimed.
  template <typename Also>
  bool Wait(Seen seen, Also also, double spin_us, int timeout_ms,
            bool* quick = nullptr);
  bool Wait(Seen seen, double spin_us, int timeout_ms, bool* quick = nullptr) {
    return Wait(
        seen, [] { return false; }, spin_us, timeout_ms, quick);
  }

 private:
  // Sleeps on `seq` unless something rang since `seen` (or `also()` holds
  // once we are counted as a sleeper).
  template <typename Rung>
  void Sleep(Seen seen, Rung rung, int timeout_ms);
};

template <typename Also>
bool Doorbell::Wait(Seen seen, Also also, double spin_us, int timeout_ms,
                    bool* quick) {
  auto rung = [&] {
    return seq.load(std::memory_order_acquire) != seen.seq ||
           local.load(std::memory_order_acquire) != seen.local || also();
  };
  std::chrono::steady_clock::time_point window{};
  const bool done = SpinUntil(rung, spin_us, &window);
  if (quick != nullptr)
    *quick = done && window == std::chrono::steady_clock::time_point{};
  if (done) return true;
  Sleep(seen, rung, timeout_ms);
  return rung();
}

template <typename Rung>
void Doorbell::Sleep(Seen seen, Rung rung, int timeout_ms) {
  // Dekker-style: we announce ourselves before the final check, a ringer
  // publishes before looking for sleepers (all of it sequentially
  // consistent), so one of us sees the other.
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!rung()) FutexWait(&seq, seen.seq, timeout_ms);
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_DOORBELL_H_
