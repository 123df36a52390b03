// Doorbell (futex wake-up of a sleeping waiter), AdaptiveSpin (spinning
// only while recent waits were short) and SpinUntil's untimed first polls.
#include "transport/doorbell.h"

#include <gtest/gtest.h>

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

TEST(Doorbell, RingWakesASleeperAndWaitTimesOut) {
  Doorbell bell;
  const uint32_t seen = bell.Read();
  EXPECT_FALSE(bell.Wait(seen, 0, 20));  // nobody rings: times out
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    bell.Ring();
  });
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(bell.Wait(seen, 0, 10000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ringer.join();
  EXPECT_NE(bell.Read(), seen);
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
  const uint32_t seen = bell.Read();
  bool quick = false;
  bell.Ring();
  EXPECT_TRUE(bell.Wait(seen, 50, 1000, &quick));
  EXPECT_TRUE(quick);
  const uint32_t now = bell.Read();
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
