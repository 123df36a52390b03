#include "transport/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace horovod {

static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words are 32 bits");

long FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT,
                 expected, timeout_ms < 0 ? nullptr : &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void Doorbell::Ring() {
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(&seq);
}

bool Doorbell::Wait(uint32_t seen, double spin_us, int timeout_ms,
                    bool* quick) {
  std::chrono::steady_clock::time_point window{};
  const bool rung = SpinUntil([&] { return Read() != seen; }, spin_us, &window);
  if (quick != nullptr)
    *quick = rung && window == std::chrono::steady_clock::time_point{};
  if (rung) return true;
  // Dekker-style: we announce ourselves before the final check, a ringer
  // bumps seq before looking for sleepers, so one of us sees the other.
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (seq.load(std::memory_order_seq_cst) == seen)
    FutexWait(&seq, seen, timeout_ms);
  sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return Read() != seen;
}

}  // namespace horovod
