// FutexLock: mutual exclusion under contention, a blocked locker is woken
// by the unlock (not by its sleep's bound), and it sleeps instead of
// spinning while it waits.
#include "runtime/futex_lock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace horovod {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(FutexLock, ExcludesEveryOtherHolder) {
  FutexLock lock;
  int64_t counter = 0;  // plain: only the lock orders its updates
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  constexpr int kThreads = 4, kRounds = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard<FutexLock> hold(lock);
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        ++counter;
        inside.fetch_sub(1);
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, int64_t{kThreads} * kRounds);
}

TEST(FutexLock, UnlockWakesASleepingLocker) {
  FutexLock lock;
  lock.lock();
  std::atomic<bool> acquired{false};
  using Clock = std::chrono::steady_clock;
  Clock::time_point got;
  auto waiter = std::async(std::launch::async, [&] {
    const double cpu0 = ThreadCpuSeconds();
    lock.lock();
    got = Clock::now();
    acquired = true;
    lock.unlock();
    return ThreadCpuSeconds() - cpu0;
  });
  // Past one bounded sleep, so the unlock finds the locker asleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  EXPECT_FALSE(acquired.load());
  const Clock::time_point freed = Clock::now();
  lock.unlock();
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_TRUE(acquired.load());
  // Woken by the unlock, not by its sleep's bound (a second).
  EXPECT_LT(std::chrono::duration<double>(got - freed).count(), 0.5)
      << "the unlock did not wake the sleeping locker";
  // 1.3 s blocked: a spinning waiter would have burnt most of it.
  EXPECT_LT(waiter.get(), 0.2);
  // Free again for an uncontended lock.
  lock.lock();
  lock.unlock();
}

}  // namespace
}  // namespace horovod
