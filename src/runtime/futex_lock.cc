#include "runtime/futex_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace horovod {

void FutexLock::LockContended() {
  // Whoever takes the word from here on marks it waited, so the unlock
  // that frees it wakes a sleeper (perhaps needlessly, never too few).
  // Each sleep is bounded all the same, as every wait in the engine is.
  const timespec bound = {kSleepBoundSeconds, 0};
  while (word_.exchange(kWaited, std::memory_order_acquire) != kFree)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAIT_PRIVATE,
            kWaited, &bound, nullptr, 0);
}

void FutexLock::Wake() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAKE_PRIVATE, 1,
          nullptr, nullptr, 0);
}

}  // namespace horovod
