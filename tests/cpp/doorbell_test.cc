// Doorbell (futex wake-up of a sleeping waiter, local rings, waking only
// sleepers), AdaptiveSpin (spinning only while recent waits were short) and
// SpinUntil's untimed first polls.
#include "transport/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace horovod {
namespace {

TEST(AdaptiveSpin, StopsSpinningAfterLongWaitsAndResumesAfterShortOnes) {
  AdaptiveSpin spin(50);
  EXPECT_EQ(spin.spin_us(), 50);  // optimistic until waits say otherwise
  for (int i = 0; i < 4; ++i) spin.Record(5000);
  EXPECT_EQ(spin.spin_us(), 50);  // a few long waits are not a trend
  for (int i = 0; i < 20; ++i) spin.Record(5000);
  EXPECT_EQ(spin.spin_us(), 0);
  for (int i = 0; i < 4; ++i) spin.Record(8);
  EXPECT_EQ(spin.spin_us(), 0);
  // Waits a little past the window (a futex wake-up each, as happens when
  // nobody spins) count as short: spinning comes back.
  for (int i = 0; i < 20; ++i) spin.Record(120);
  EXPECT_EQ(spin.spin_us(), 50);
}

TEST(AdaptiveSpin, NoWindowNeverSpins) {
  AdaptiveSpin spin(0);
  spin.Record(0);
  EXPECT_EQ(spin.spin_us(), 0);
}

bool Same(Doorbell::Seen a, Doorbell::Seen b) {
  return a.seq == b.seq && a.local == b.local;
}

TEST(Doorbell, RingWakesASleeperAndWaitTimesOut) {
  Doorbell bell;
  const Doorbell::Seen seen = bell.Read();
  EXPECT_FALSE(bell.Wait(seen, 0, 20));  // nobody rings: times out
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    bell.Ring();
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(bell.Wait(seen, 0, 10000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ringer.join();
  EXPECT_FALSE(Same(bell.Read(), seen));
}

// The owner's rings leave `seq`, the line peers ring, alone while nobody
// sleeps, end a wait all the same, and wake a sleeper.
TEST(Doorbell, LocalRingsEndWaitsAndWakeSleepersWithoutTouchingSeq) {
  Doorbell bell;
  Doorbell::Seen seen = bell.Read();
  bell.RingLocal();
  EXPECT_EQ(bell.Read().seq, seen.seq);
  EXPECT_NE(bell.Read().local, seen.local);
  EXPECT_TRUE(bell.Wait(seen, 0, 1000));
  seen = bell.Read();
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    bell.RingLocal();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(bell.Wait(seen, 0, 10000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ringer.join();
}

// A ringer that publishes state the waiter checks itself rings only when
// the waiter sleeps: a spinning waiter ends on the state, and no sleeper
// misses a wake-up, however the two interleave.
TEST(Doorbell, WakeSleepersReachesEverySleeperAndLeavesSpinnersAlone) {
  Doorbell bell;
  std::atomic<uint32_t> posted{0};
  Doorbell::Seen seen = bell.Read();
  posted.store(1);
  bell.WakeSleepers();  // nobody sleeps: no ring
  EXPECT_TRUE(Same(bell.Read(), seen));
  bool quick = false;
  EXPECT_TRUE(bell.Wait(
      seen, [&] { return posted.load() >= 1; }, 50, 1000, &quick));
  EXPECT_TRUE(quick);
  // Rounds: the waiter sleeps at once (no spin) until round k is posted.
  // A wait may end early (a wake-up meant for the round before), so it
  // waits again, as the engine's loop does; a lost wake-up would leave it
  // asleep for its whole 2 s timeout.
  using SteadyClock = std::chrono::steady_clock;
  const uint32_t rounds = 2000;
  std::atomic<uint32_t> waited{1};
  std::thread poster([&] {
    for (uint32_t k = 2; k <= rounds + 1; ++k) {
      while (waited.load() < k - 1) CpuRelax();  // the waiter took k - 1
      // A varying pause, so posts meet the waiter at every stage of its
      // wait: checking, about to sleep, asleep.
      for (uint32_t i = 0; i < k * 7919 % 4096; ++i) CpuRelax();
      posted.store(k);  // sequentially consistent, as WakeSleepers asks
      bell.WakeSleepers();
    }
  });
  int late = 0;
  for (uint32_t k = 2; k <= rounds + 1; ++k) {
    const auto start = SteadyClock::now();
    while (posted.load() < k &&
           SteadyClock::now() - start < std::chrono::seconds(3))
      bell.Wait(
          bell.Read(), [&] { return posted.load() >= k; }, 0, 2000);
    if (SteadyClock::now() - start > std::chrono::seconds(1)) ++late;
    waited.store(late > 0 ? rounds + 1 : k);  // one is enough: let it finish
    if (late > 0) break;
  }
  poster.join();
  EXPECT_EQ(late, 0);
}

TEST(SpinUntil, FirstPollsReadNoClockAndTheWindowIsTimedAfter) {
  using SteadyClock = std::chrono::steady_clock;
  const SteadyClock::time_point unset{};
  int polls = 0;
  auto after = [&](int n) {
    polls = 0;
    return [&polls, n] { return ++polls > n; };
  };
  // Within the first polls: done, and the window never started.
  SteadyClock::time_point window = unset;
  EXPECT_TRUE(SpinUntil(after(kQuickPolls / 2), 50, &window));
  EXPECT_EQ(window, unset);
  // Past them: the window starts with its clock read.
  const auto before = SteadyClock::now();
  EXPECT_TRUE(SpinUntil(after(kQuickPolls + 10), 1e6, &window));
  EXPECT_GE(window, before);
  // No spin: one poll, no window.
  window = unset;
  EXPECT_FALSE(SpinUntil(after(1), 0, &window));
  EXPECT_EQ(polls, 1);
  EXPECT_EQ(window, unset);
  // A window that runs out: false, after it started.
  EXPECT_FALSE(SpinUntil([] { return false; }, 20, &window));
  EXPECT_NE(window, unset);
}

TEST(Doorbell, WaitSaysWhetherTheRingCameWithinTheFirstPolls) {
  Doorbell bell;
  const Doorbell::Seen seen = bell.Read();
  bool quick = false;
  bell.Ring();
  EXPECT_TRUE(bell.Wait(seen, 50, 1000, &quick));
  EXPECT_TRUE(quick);
  const Doorbell::Seen now = bell.Read();
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    bell.Ring();
  });
  EXPECT_TRUE(bell.Wait(now, 50, 10000, &quick));  // spun, then slept
  EXPECT_FALSE(quick);
  ringer.join();
  EXPECT_FALSE(bell.Wait(bell.Read(), 50, 5, &quick));  // timed out
  EXPECT_FALSE(quick);
}

}  // namespace
}  // namespace horovod
