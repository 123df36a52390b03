// TickClock: ticks taken around an interval convert to the time
// steady_clock measures around the same interval; readings never run
// backwards on one thread, and an interval that would is none.
#include "common/tick_clock.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

namespace horovod {
namespace {

using SteadyClock = std::chrono::steady_clock;

TEST(TickClock, TicksConvertToTheTimeTheyMeasure) {
  const TickClock clock;
  for (int round = 0; round < 3; ++round) {
    const auto s0 = SteadyClock::now();
    const uint64_t t0 = clock.Now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t t1 = clock.Now();
    const auto s1 = SteadyClock::now();
    ASSERT_GE(t1, t0);
    // Both clocks measured the same sleep, the ticks inside the steady
    // readings: within a percent and the readings' own cost.
    const auto steady = s1 - s0;
    const auto ticks = clock.ToDuration(t1 - t0);
    EXPECT_LE(ticks, steady * 101 / 100 + std::chrono::microseconds(50));
    EXPECT_GE(ticks, steady * 99 / 100 - std::chrono::microseconds(50));
  }
}

TEST(TickClock, ReadingsNeverRunBackwards) {
  const TickClock clock;
  // A start a lagging counter would put in the future counts as none.
  EXPECT_EQ(clock.Since(std::numeric_limits<uint64_t>::max()), 0u);
  const uint64_t begin = clock.Now();
  EXPECT_LT(clock.Since(begin), uint64_t{1} << 62);
  uint64_t last = clock.Now();
  for (int i = 0; i < 100000; ++i) {
    const uint64_t now = clock.Now();
    ASSERT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace horovod
