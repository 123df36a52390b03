#include "runtime/futex_lock.h"

#include "transport/doorbell.h"  // FutexWait, FutexWakeAll

namespace horovod {

void FutexLock::LockContended() {
  // Whoever takes the word from here on marks it waited, so the unlock
  // that frees it wakes a sleeper (perhaps needlessly, never too few).
  // Each sleep is bounded all the same, as every wait in the engine is.
  while (word_.exchange(kWaited, std::memory_order_acquire) != kFree)
    FutexWait(&word_, kWaited, kSleepBoundMs);
}

// Every sleeper wakes; all but one find the word taken and sleep again.
void FutexLock::Wake() { FutexWakeAll(&word_); }

}  // namespace horovod
