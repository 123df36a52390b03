// Doorbell (futex wake-up of a sleeping waiter) and AdaptiveSpin (spinning
// only while recent waits were short).
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

}  // namespace
}  // namespace horovod
