#include "common/tick_clock.h"

#include <fstream>
#include <string>

namespace horovod {
namespace {

// The kernel settles on the time-stamp counter only after checking that it
// runs at a constant rate and in step on every core; a counter it rejected
// could jump as a thread moves between cores.
bool KernelKeepsTimeByTsc() {
  std::ifstream in(
      "/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return static_cast<bool>(in >> source) && source == "tsc";
}

}  // namespace

TickClock::TickClock() {
#ifdef HVD_TICK_CLOCK_TSC
  tsc_ = KernelKeepsTimeByTsc();
#endif
  steady0_ = std::chrono::steady_clock::now();
  tick0_ = Now();
}

std::chrono::nanoseconds TickClock::ToDuration(uint64_t ticks) const {
  if (!tsc_) return std::chrono::nanoseconds(static_cast<int64_t>(ticks));
  const uint64_t span_ticks = Now() - tick0_;
  const auto span = std::chrono::steady_clock::now() - steady0_;
  if (span_ticks == 0) return std::chrono::nanoseconds(0);
  const double ns_per_tick =
      std::chrono::duration<double, std::nano>(span).count() /
      static_cast<double>(span_ticks);
  return std::chrono::nanoseconds(
      static_cast<int64_t>(static_cast<double>(ticks) * ns_per_tick));
}

}  // namespace horovod
