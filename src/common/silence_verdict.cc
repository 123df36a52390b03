#include "common/silence_verdict.h"

#include <cstdio>

namespace horovod {

namespace {
// %n is set only when the whole pattern matched.
constexpr char kPattern[] = "rank %d sent nothing for%n";
}  // namespace

std::string SilenceVerdict(int rank, double seconds,
                           const std::string& likely_cause) {
  char head[96];
  std::snprintf(head, sizeof(head), "rank %d sent nothing for %.1f s ", rank,
                seconds);
  return head + std::string("(HOROVOD_OPERATION_TIMEOUT_SECONDS); it is ") +
         likely_cause;
}

int SilentRank(const std::string& message) {
  int rank = -1, end = 0;
  std::sscanf(message.c_str(), kPattern, &rank, &end);
  return end > 0 ? rank : -1;
}

}  // namespace horovod
