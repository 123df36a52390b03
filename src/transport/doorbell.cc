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

void Doorbell::RingLocal() {
  local.fetch_add(1, std::memory_order_seq_cst);
  // A sleeper sleeps on `seq`: move it too.
  if (sleepers.load(std::memory_order_seq_cst) != 0) Ring();
}

void Doorbell::WakeSleepers() {
  if (sleepers.load(std::memory_order_seq_cst) != 0) Ring();
}

}  // namespace horovod
